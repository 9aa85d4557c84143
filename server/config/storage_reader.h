// Reads the `storage` section of the config file: how datasets with a
// `source` are staged onto local disk (docs/storage.md).
//
// Internal to server/config/; config_loader.cc is its caller.
//
// Thread-safety: a function over its arguments; it writes only to the
// Diagnostics it is handed.
#ifndef STOKER_SERVER_CONFIG_STORAGE_READER_H_
#define STOKER_SERVER_CONFIG_STORAGE_READER_H_

#include <filesystem>

#include "server/config/options.h"
#include "server/config/yaml_util.h"

namespace stoker::config::internal {

// Reads `storage: {cache_limit: 500GiB, s3: {region: ..., ...}}` into `out`;
// mistakes are reported at their key. `s3.credentials_file` is resolved
// against `base_dir` (the config file's directory).
void ReadStorage(const MapEntry& entry, const std::filesystem::path& base_dir,
                 StorageOptions* out, Diagnostics& diag);

}  // namespace stoker::config::internal

#endif  // STOKER_SERVER_CONFIG_STORAGE_READER_H_
