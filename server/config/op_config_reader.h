// Reads one pipeline's list of steps from YAML into pipeline::OpConfig values,
// checking each op name and argument against the op registry.
//
// Internal to server/config/; config_loader.cc is its caller and
// config_reference.cc borrows FormatArgValue.
//
// Thread-safety: pure functions over their arguments; the registry is only
// read.

#ifndef STOKER_SERVER_CONFIG_OP_CONFIG_READER_H_
#define STOKER_SERVER_CONFIG_OP_CONFIG_READER_H_

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/config/yaml_util.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/registry.h"

namespace stoker::config::internal {

// Reads the steps of pipeline `pipeline_name`. `steps` is the YAML value of
// the pipeline's entry and `mark` where to point when it is empty. A step is
// one of:
//   - OP: {ARG: VALUE, ...}   arguments by name
//   - OP: VALUE               fills the op's scalar_arg (`- layout: chw`)
//   - OP:  or  - OP           no arguments
// Each argument is checked against its ArgSpec type and stored in the form
// ResolveArgs expects (an int for a float becomes a double; an int for
// kIntOrPair becomes [n]); required arguments must be present; defaults are
// not filled in. Every mistake is reported to `diag`. Returns the ops if this
// pipeline had no mistakes.
std::optional<std::vector<pipeline::OpConfig>> ReadOpConfigs(
    const YAML::Node& steps, const YAML::Mark& mark,
    absl::string_view pipeline_name, const pipeline::OpRegistry& registry,
    Diagnostics& diag);

// What a value of `type` looks like, for "expected ..." in messages:
// "an integer or a pair [height, width]".
std::string ArgTypeExpectation(pipeline::ArgType type);

// `value` as it would be written in YAML: true, 224, 0.5, chw, [0.5, 0.5].
std::string FormatArgValue(const pipeline::ArgValue& value);

}  // namespace stoker::config::internal

#endif  // STOKER_SERVER_CONFIG_OP_CONFIG_READER_H_
