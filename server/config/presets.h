// Pipeline presets: one YAML file per pipeline in a folder (config/presets/
// in the source tree), named NAME.yaml, holding what a config's
// `pipelines.NAME` holds (a list of ops, or the map with views). A config
// names one with `pipelines.train: {preset: imagenet_train}`.
//
// The folder is found in this order: the folder given (the --presets flag),
// $STOKER_PRESETS, ../share/stoker/presets beside the running binary (an
// installed stokerd), the install prefix's share/stoker/presets, and the
// source tree's config/presets (a stokerd run from its build folder).
//
// Thread-safety: functions over their arguments and the filesystem.

#ifndef STOKER_SERVER_CONFIG_PRESETS_H_
#define STOKER_SERVER_CONFIG_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::config {

// The presets folder: `given` if not empty, else the first of the places
// above that is a directory. NotFound, naming every place tried and how to
// set one, if there is none.
absl::StatusOr<std::string> FindPresetsDir(const std::string& given);

// The preset names in `dir` (files NAME.yaml), sorted.
std::vector<std::string> ListPresets(const std::string& dir);

// The path of preset `name` in `dir`. NotFound naming the preset, the
// folder and the presets it has if there is no such file; InvalidArgument
// if `name` is not a plain name (letters, digits, '_', '-', '.').
absl::StatusOr<std::string> PresetPath(const std::string& dir,
                                       const std::string& name);

// A Markdown table of the presets in `dir`: name and the first paragraph of
// the file's leading comment. For `stokerd --help-config`.
std::string PresetReference(const std::string& dir);

}  // namespace stoker::config

#endif  // STOKER_SERVER_CONFIG_PRESETS_H_
