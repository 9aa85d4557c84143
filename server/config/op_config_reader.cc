#include "server/config/op_config_reader.h"

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace stoker::config::internal {
namespace {

using pipeline::ArgSpec;
using pipeline::ArgType;
using pipeline::ArgValue;
using pipeline::OpArgs;
using pipeline::OpDef;

// Reads `node` as one value or a pair [a, b], each read by `parse`, into a
// list of 1 or 2; reports and returns nullopt on a mismatch.
template <typename Parse>
std::optional<ArgValue> ReadOneOrPair(const ArgSpec& spec,
                                      const YAML::Node& node,
                                      const YAML::Mark& mark,
                                      absl::string_view what, Diagnostics& diag,
                                      Parse parse) {
  const auto mismatch = [&](const YAML::Mark& at, const YAML::Node& got) {
    diag.Error(at,
               absl::StrCat(what, ": expected ", ArgTypeExpectation(spec.type),
                            ", got ", Describe(got)));
    return std::nullopt;
  };
  if (node.IsScalar()) {
    if (std::optional<double> value = parse(node.Scalar())) {
      return std::vector<double>{*value};
    }
    return mismatch(mark, node);
  }
  if (!node.IsSequence()) return mismatch(mark, node);
  if (node.size() != 2) {
    diag.Error(mark,
               absl::StrCat(what, ": expected ", ArgTypeExpectation(spec.type),
                            ", got a list of ", node.size()));
    return std::nullopt;
  }
  std::vector<double> values;
  for (const YAML::Node& element : node) {
    std::optional<double> value;
    if (element.IsScalar()) value = parse(element.Scalar());
    if (!value) return mismatch(MarkOf(element, mark), element);
    values.push_back(*value);
  }
  return values;
}

// Reads `node` as a value of `spec.type`; reports and returns nullopt on a
// mismatch. `what` names the argument in messages.
std::optional<ArgValue> ReadTypedValue(const ArgSpec& spec,
                                       const YAML::Node& node,
                                       const YAML::Mark& mark,
                                       absl::string_view what,
                                       Diagnostics& diag) {
  const auto mismatch = [&](const YAML::Mark& at, const YAML::Node& got) {
    diag.Error(at,
               absl::StrCat(what, ": expected ", ArgTypeExpectation(spec.type),
                            ", got ", Describe(got)));
    return std::nullopt;
  };
  const bool scalar = node.IsScalar();
  switch (spec.type) {
    case ArgType::kBool:
      if (scalar) {
        if (std::optional<bool> value = ParseBool(node.Scalar())) return *value;
      }
      return mismatch(mark, node);
    case ArgType::kInt:
      if (scalar) {
        if (std::optional<int64_t> value = ParseInt(node.Scalar())) {
          return *value;
        }
      }
      return mismatch(mark, node);
    case ArgType::kFloat:
      if (scalar) {
        if (std::optional<double> value = ParseNumber(node.Scalar())) {
          return *value;
        }
      }
      return mismatch(mark, node);
    case ArgType::kString:
      if (scalar) return node.Scalar();
      return mismatch(mark, node);
    case ArgType::kFloatList: {
      if (!node.IsSequence()) return mismatch(mark, node);
      std::vector<double> values;
      for (const YAML::Node& element : node) {
        std::optional<double> value;
        if (element.IsScalar()) value = ParseNumber(element.Scalar());
        if (!value) return mismatch(MarkOf(element, mark), element);
        values.push_back(*value);
      }
      return values;
    }
    case ArgType::kIntOrPair: {
      // A single integer n is stored as [n]; what it means (resize: the
      // shorter side; a crop: n x n) is the op's business.
      const auto parse = [](const std::string& text) -> std::optional<double> {
        if (std::optional<int64_t> value = ParseInt(text)) return *value;
        return std::nullopt;
      };
      return ReadOneOrPair(spec, node, mark, what, diag, parse);
    }
    case ArgType::kFloatOrPair:
      return ReadOneOrPair(spec, node, mark, what, diag, ParseNumber);
    case ArgType::kStringList: {
      if (!node.IsSequence()) return mismatch(mark, node);
      std::vector<std::string> values;
      for (const YAML::Node& element : node) {
        if (!element.IsScalar())
          return mismatch(MarkOf(element, mark), element);
        values.push_back(element.Scalar());
      }
      return values;
    }
  }
  return mismatch(mark, node);
}

// Reads `node` as a value of `spec`: its type, then its range or choices,
// reported at the value (or the list element) that breaks them.
std::optional<ArgValue> ReadArgValue(const ArgSpec& spec,
                                     const YAML::Node& node,
                                     const YAML::Mark& mark,
                                     absl::string_view what,
                                     Diagnostics& diag) {
  std::optional<ArgValue> value = ReadTypedValue(spec, node, mark, what, diag);
  if (!value) return std::nullopt;
  const std::optional<pipeline::ArgValueProblem> problem =
      pipeline::CheckArgValue(spec, *value);
  if (!problem) return value;
  YAML::Node at = node;
  if (problem->element >= 0 && node.IsSequence()) at = node[problem->element];
  diag.Error(MarkOf(at, mark),
             absl::StrCat(what, ": expected ", problem->expected, ", got ",
                          Describe(at)));
  return std::nullopt;
}

const ArgSpec* FindSpec(const OpDef& def, absl::string_view name) {
  for (const ArgSpec& spec : def.args) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Reads the arguments of one step into `config.args`. Returns false if any
// was wrong.
bool ReadArgs(const OpDef& def, const YAML::Node& value,
              const YAML::Mark& step_mark, absl::string_view pipeline_name,
              pipeline::OpConfig& config, Diagnostics& diag) {
  const size_t errors_before = diag.error_count();
  const std::string op_where =
      absl::StrCat("op '", def.name, "' in pipeline '", pipeline_name, "'");
  const auto arg_where = [&](absl::string_view arg) {
    return absl::StrCat("argument '", arg, "' of ", op_where);
  };

  if (value.IsMap()) {
    std::vector<std::string> names;
    for (const ArgSpec& spec : def.args) names.push_back(spec.name);
    for (const MapEntry& entry :
         ReadMap(value, absl::StrCat("arguments of ", op_where), names, diag)) {
      const ArgSpec* spec = FindSpec(def, entry.key);
      std::optional<ArgValue> arg = ReadArgValue(
          *spec, entry.value, entry.value_mark, arg_where(entry.key), diag);
      if (arg) config.args[entry.key] = std::move(*arg);
    }
  } else if (value.IsDefined() && !value.IsNull()) {
    // A scalar or a list: the value of the op's scalar argument, if any.
    const ArgSpec* spec =
        def.scalar_arg.empty() ? nullptr : FindSpec(def, def.scalar_arg);
    const YAML::Mark mark = MarkOf(value, step_mark);
    if (spec == nullptr) {
      const std::string expected =
          def.args.empty() ? std::string("{} (it takes no arguments)")
                           : absl::StrCat("a map of arguments like {",
                                          def.args[0].name, ": ...}");
      diag.Error(mark, absl::StrCat(op_where, " is given ", Describe(value),
                                    "; expected ", expected));
    } else {
      std::optional<ArgValue> arg =
          ReadArgValue(*spec, value, mark, arg_where(spec->name), diag);
      if (arg) config.args[spec->name] = std::move(*arg);
    }
  }

  // Required arguments must be there. Defaults are left out: OpConfig holds
  // what the config says, and Pipeline::Create fills them (ResolveArgs).
  // Skipped if an argument was wrong: it may be the missing one, misspelled.
  if (diag.error_count() != errors_before) return false;
  for (const ArgSpec& spec : def.args) {
    if (spec.required && config.args.count(spec.name) == 0) {
      diag.Error(
          step_mark,
          absl::StrCat(op_where, " is missing required argument '", spec.name,
                       "'; expected ", ArgTypeExpectation(spec.type)));
    }
  }
  return diag.error_count() == errors_before;
}

}  // namespace

std::optional<std::vector<pipeline::OpConfig>> ReadOpConfigs(
    const YAML::Node& steps, const YAML::Mark& mark,
    absl::string_view pipeline_name, const pipeline::OpRegistry& registry,
    Diagnostics& diag) {
  if (!steps.IsSequence()) {
    diag.Error(mark, absl::StrCat("pipeline '", pipeline_name, "' is ",
                                  Describe(steps),
                                  "; expected a list of ops like "
                                  "[decode_jpeg, center_crop: {size: 224}]"));
    return std::nullopt;
  }
  if (steps.size() == 0) {
    diag.Error(mark, absl::StrCat("pipeline '", pipeline_name,
                                  "' has no ops; expected at least one"));
    return std::nullopt;
  }

  const size_t errors_before = diag.error_count();
  std::vector<pipeline::OpConfig> configs;
  for (const YAML::Node& step : steps) {
    const YAML::Mark step_mark = MarkOf(step, mark);
    YAML::Node name_node;
    YAML::Node value;
    if (step.IsScalar()) {
      name_node = step;
    } else if (step.IsMap() && step.size() == 1) {
      name_node = step.begin()->first;
      value = step.begin()->second;
    } else if (step.IsMap()) {
      std::vector<std::string> keys;
      for (auto it = step.begin(); it != step.end(); ++it) {
        keys.push_back(it->first.IsScalar() ? it->first.Scalar()
                                            : Describe(it->first));
      }
      diag.Error(step_mark,
                 absl::StrCat("a step of pipeline '", pipeline_name, "' has ",
                              keys.size(), " keys (", absl::StrJoin(keys, ", "),
                              "); expected one key, the op name, with its "
                              "arguments in a map under it"));
      continue;
    } else {
      diag.Error(step_mark,
                 absl::StrCat("a step of pipeline '", pipeline_name, "' is ",
                              Describe(step),
                              "; expected an op like `resize: {size: 256}`"));
      continue;
    }

    if (!name_node.IsScalar()) {
      diag.Error(
          MarkOf(name_node, step_mark),
          absl::StrCat("an op name in pipeline '", pipeline_name, "' is ",
                       Describe(name_node), "; expected a name like resize"));
      continue;
    }
    const std::string& name = name_node.Scalar();
    const OpDef* def = registry.Find(name);
    if (def == nullptr) {
      diag.Error(step_mark,
                 UnknownNameMessage(
                     "op", name, absl::StrCat("pipeline '", pipeline_name, "'"),
                     registry.Names()));
      continue;
    }
    pipeline::OpConfig config;
    config.name = name;
    config.line = step_mark.line + 1;
    if (ReadArgs(*def, value, step_mark, pipeline_name, config, diag)) {
      configs.push_back(std::move(config));
    }
  }
  if (diag.error_count() != errors_before) return std::nullopt;
  return configs;
}

std::string ArgTypeExpectation(pipeline::ArgType type) {
  switch (type) {
    case ArgType::kBool:
      return "true or false";
    case ArgType::kInt:
      return "an integer";
    case ArgType::kFloat:
      return "a number";
    case ArgType::kString:
      return "a string";
    case ArgType::kFloatList:
      return "a list of numbers like [0.5, 0.5, 0.5]";
    case ArgType::kIntOrPair:
      return "an integer or a pair [height, width]";
    case ArgType::kFloatOrPair:
      return "a number or a pair [lo, hi]";
    case ArgType::kStringList:
      return "a list of names like [caption, boxes]";
  }
  return "a value";
}

std::string FormatArgValue(const pipeline::ArgValue& value) {
  struct Formatter {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return absl::StrCat(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const std::vector<double>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
  };
  return std::visit(Formatter{}, value);
}

}  // namespace stoker::config::internal
