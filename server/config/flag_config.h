// A daemon config from command-line flags, for `stokerd --dataset NAME=PATH
// --pipeline NAME=PRESET [--listen unix:PATH]` without a config file. The
// flags become the YAML text of an equivalent config, which LoadConfigString
// checks as it checks a file, so both ways share every rule and message.
//
// Thread-safety: a pure function.
#ifndef STOKER_SERVER_CONFIG_FLAG_CONFIG_H_
#define STOKER_SERVER_CONFIG_FLAG_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::config {

struct ConfigFlags {
  // Each "NAME=PATH"; a relative PATH is relative to the current directory.
  std::vector<std::string> datasets;
  // Each "NAME=PRESET", or "PRESET" for a pipeline named as its preset.
  std::vector<std::string> pipelines;
  // "unix:PATH" or "HOST:PORT"; empty: unix:/run/stoker/stoker.sock.
  std::string listen;
};

// The config the flags describe, as YAML (workers and prefetch auto, the
// other keys at their defaults). InvalidArgument naming the flag for a
// value without NAME=, or no --dataset or no --pipeline.
absl::StatusOr<std::string> ConfigFromFlags(const ConfigFlags& flags);

}  // namespace stoker::config

#endif  // STOKER_SERVER_CONFIG_FLAG_CONFIG_H_
