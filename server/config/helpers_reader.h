// Reads the `helpers` section of the config file: the helper daemons that
// may build chunks of this daemon's batches (docs/remote-design.md).
//
// Internal to server/config/; config_loader.cc is its caller.
//
// Thread-safety: a function over its arguments; it writes only to the
// Diagnostics it is handed.
#ifndef STOKER_SERVER_CONFIG_HELPERS_READER_H_
#define STOKER_SERVER_CONFIG_HELPERS_READER_H_

#include <filesystem>

#include "server/config/options.h"
#include "server/config/yaml_util.h"

namespace stoker::config::internal {

// Reads `helpers: {addresses: [HOST:PORT, ...], placement: ..., ...}` into
// `out`; mistakes are reported at their key or list item. TLS paths are
// resolved against `base_dir` (the config file's directory). Plaintext to
// a helper beyond loopback (an address, or any DNS name but localhost) is
// an error unless `insecure: true`.
void ReadHelpers(const MapEntry& entry, const std::filesystem::path& base_dir,
                 HelperOptions* out, Diagnostics& diag);

}  // namespace stoker::config::internal

#endif  // STOKER_SERVER_CONFIG_HELPERS_READER_H_
