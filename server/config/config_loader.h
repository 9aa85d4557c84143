// Loads the daemon's YAML config file into ServerOptions, strictly.
//
// Every mistake is an InvalidArgument whose message has one line per
// mistake, each "FILE:LINE:COL: what was wrong; what was expected", e.g.
//   stoker.yaml:3:16: memory_budget: expected a size like 2GiB, got 'lots'
//   stoker.yaml:7:5: unknown op 'random_crop' in pipeline 'train'; expected
//       one of: center_crop, decode_jpeg, ...
// Mistakes are: YAML syntax errors, unknown or duplicate keys at any level,
// values of the wrong type or out of range, a missing required key, an op
// name or argument the op registry does not know or a value of the wrong
// type for it, a pipeline that Pipeline::Create rejects, and a dataset path
// that does not exist or is not a directory. The keys and their meaning are
// in ConfigReference() (config_reference.h).
//
// Thread-safety: both functions are safe to call from any thread; they read
// the filesystem and the (immutable after start-up) op registry.

#ifndef STOKER_SERVER_CONFIG_CONFIG_LOADER_H_
#define STOKER_SERVER_CONFIG_CONFIG_LOADER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/config/options.h"

namespace stoker::config {

// How to load, beyond the text itself.
struct LoadOptions {
  // The pipeline presets folder for `{preset: NAME}`; empty: the one
  // FindPresetsDir finds (presets.h).
  std::string presets_dir;
};

// Reads and checks the config file at `path`. Relative paths in it (dataset
// paths, the unix socket) resolve against the file's directory. A file that
// cannot be read gives the status of the failed read (NotFound,
// PermissionDenied, ...) naming the path.
absl::StatusOr<ServerOptions> LoadConfigFile(const std::string& path,
                                             const LoadOptions& load = {});

// Checks `yaml` as if it were read from a file named `source_name`: messages
// start with `source_name`, and relative paths resolve against its directory
// (the current directory if it has none).
absl::StatusOr<ServerOptions> LoadConfigString(std::string_view yaml,
                                               std::string_view source_name,
                                               const LoadOptions& load = {});

}  // namespace stoker::config

#endif  // STOKER_SERVER_CONFIG_CONFIG_LOADER_H_
