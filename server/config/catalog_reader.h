// Reads the two sections of the config file that clients name in requests:
// `datasets` (name -> directory) and `pipelines` (name -> list of ops).
//
// Internal to server/config/; config_loader.cc is its caller.
//
// Thread-safety: functions over their arguments; they read the filesystem
// and the op registry, and write only to the Diagnostics they are handed.

#ifndef STOKER_SERVER_CONFIG_CATALOG_READER_H_
#define STOKER_SERVER_CONFIG_CATALOG_READER_H_

#include <filesystem>
#include <string>
#include <vector>

#include "server/config/options.h"
#include "server/config/yaml_util.h"

namespace stoker::config::internal {

// Reads the `datasets` entry: a non-empty map of names to {path: DIR}.
// Relative paths resolve against `base_dir` (absolute); each must be an
// existing directory. Returns the datasets that had no mistakes, in file
// order.
std::vector<DatasetOptions> ReadDatasets(const MapEntry& entry,
                                         const std::filesystem::path& base_dir,
                                         Diagnostics& diag);

// Reads the `pipelines` entry: a non-empty map of names to lists of ops
// (see ReadOpConfigs), each accepted by pipeline::Pipeline::Create, whose
// errors are reported at the op that caused them (FailedOpIndex), else at
// the pipeline's name. A pipeline written {preset: NAME} takes the ops of
// NAME.yaml in `presets_dir` (empty: the folder FindPresetsDir finds; see
// presets.h). Returns the pipelines that had no mistakes, in file order.
std::vector<PipelineOptions> ReadPipelines(const MapEntry& entry,
                                           const std::string& presets_dir,
                                           Diagnostics& diag);

}  // namespace stoker::config::internal

#endif  // STOKER_SERVER_CONFIG_CATALOG_READER_H_
