#include "server/pipeline/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::pipeline {
namespace {

// Converts `value` to the canonical form of `type`, or explains why not.
absl::StatusOr<ArgValue> Canonical(ArgType type, const ArgValue& value) {
  const auto mismatch = [&]() {
    return absl::InvalidArgumentError(
        absl::StrCat("expects ", std::string(ArgTypeName(type))));
  };
  switch (type) {
    case ArgType::kBool:
      if (std::holds_alternative<bool>(value)) return value;
      return mismatch();
    case ArgType::kInt:
      if (std::holds_alternative<int64_t>(value)) return value;
      return mismatch();
    case ArgType::kFloat:
      if (const auto* i = std::get_if<int64_t>(&value)) {
        return ArgValue(static_cast<double>(*i));
      }
      if (std::holds_alternative<double>(value)) return value;
      return mismatch();
    case ArgType::kString:
      if (std::holds_alternative<std::string>(value)) return value;
      return mismatch();
    case ArgType::kFloatList:
      if (std::holds_alternative<std::vector<double>>(value)) return value;
      return mismatch();
    case ArgType::kStringList:
      if (std::holds_alternative<std::vector<std::string>>(value)) {
        return value;
      }
      return mismatch();
    case ArgType::kIntOrPair: {
      if (const auto* i = std::get_if<int64_t>(&value)) {
        return ArgValue(std::vector<double>{static_cast<double>(*i)});
      }
      const auto* list = std::get_if<std::vector<double>>(&value);
      if (list == nullptr || list->empty() || list->size() > 2) {
        return mismatch();
      }
      for (double v : *list) {
        if (v != std::trunc(v)) return mismatch();
      }
      return value;
    }
    case ArgType::kFloatOrPair: {
      if (const auto* i = std::get_if<int64_t>(&value)) {
        return ArgValue(std::vector<double>{static_cast<double>(*i)});
      }
      if (const auto* d = std::get_if<double>(&value)) {
        return ArgValue(std::vector<double>{*d});
      }
      const auto* list = std::get_if<std::vector<double>>(&value);
      if (list == nullptr || list->empty() || list->size() > 2) {
        return mismatch();
      }
      return value;
    }
  }
  return mismatch();
}

// The numbers a canonical value holds, for range checks; empty for values
// that are not numbers.
std::vector<double> NumbersOf(const ArgValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    return {static_cast<double>(*i)};
  }
  if (const auto* d = std::get_if<double>(&value)) return {*d};
  if (const auto* list = std::get_if<std::vector<double>>(&value)) {
    return *list;
  }
  return {};
}

bool InRange(const ArgSpec& spec, double v) {
  if (spec.min.has_value()) {
    if (spec.min_exclusive ? !(v > *spec.min) : !(v >= *spec.min)) {
      return false;
    }
  }
  if (spec.max.has_value() && !(v <= *spec.max)) return false;
  return true;
}

bool HasRange(const ArgSpec& spec) {
  return spec.min.has_value() || spec.max.has_value();
}

bool IsNumeric(ArgType type) {
  return type == ArgType::kInt || type == ArgType::kFloat ||
         type == ArgType::kFloatList || type == ArgType::kIntOrPair ||
         type == ArgType::kFloatOrPair;
}

// A Register check of one argument's declaration; empty when it is sound.
std::string SpecProblem(const ArgSpec& arg) {
  if (arg.name.empty()) return "an argument has no name";
  const std::string quoted = absl::StrCat("'", arg.name, "'");
  if (HasRange(arg) && !IsNumeric(arg.type)) {
    return absl::StrCat(quoted, " has a range but is not a number");
  }
  if (arg.min.has_value() && arg.max.has_value() &&
      !(arg.min_exclusive ? *arg.min < *arg.max : *arg.min <= *arg.max)) {
    return absl::StrCat(quoted, " has an empty range ", RangeText(arg));
  }
  if (!arg.choices.empty() && arg.type != ArgType::kString) {
    return absl::StrCat(quoted, " has choices but is not a string");
  }
  if (!arg.default_value.has_value()) return "";
  if (arg.required) {
    return absl::StrCat("required argument ", quoted, " has a default");
  }
  absl::StatusOr<ArgValue> value = Canonical(arg.type, *arg.default_value);
  if (!value.ok()) {
    return absl::StrCat("default of ", quoted, " is not ",
                        std::string(ArgTypeName(arg.type)));
  }
  if (std::optional<ArgValueProblem> problem = CheckArgValue(arg, *value)) {
    return absl::StrCat("default of ", quoted, " is not ", problem->expected);
  }
  return "";
}

bool IsOpName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view ArgTypeName(ArgType type) {
  switch (type) {
    case ArgType::kBool:
      return "bool";
    case ArgType::kInt:
      return "int";
    case ArgType::kFloat:
      return "float";
    case ArgType::kString:
      return "string";
    case ArgType::kFloatList:
      return "float list";
    case ArgType::kIntOrPair:
      return "int or [h, w]";
    case ArgType::kFloatOrPair:
      return "float or [lo, hi]";
    case ArgType::kStringList:
      return "string list";
  }
  return "unknown";
}

ArgSpec ArgSpec::Required(std::string name, ArgType type, std::string doc) {
  ArgSpec spec;
  spec.name = std::move(name);
  spec.type = type;
  spec.required = true;
  spec.doc = std::move(doc);
  return spec;
}

ArgSpec ArgSpec::Optional(std::string name, ArgType type,
                          std::optional<ArgValue> default_value,
                          std::string doc) {
  ArgSpec spec;
  spec.name = std::move(name);
  spec.type = type;
  spec.default_value = std::move(default_value);
  spec.doc = std::move(doc);
  return spec;
}

ArgSpec& ArgSpec::Between(double lo, double hi) {
  min = lo;
  max = hi;
  min_exclusive = false;
  return *this;
}

ArgSpec& ArgSpec::AtLeast(double lo) {
  min = lo;
  min_exclusive = false;
  return *this;
}

ArgSpec& ArgSpec::Above(double lo) {
  min = lo;
  min_exclusive = true;
  return *this;
}

ArgSpec& ArgSpec::AtMost(double hi) {
  max = hi;
  return *this;
}

ArgSpec& ArgSpec::OneOf(std::vector<std::string> values) {
  choices = std::move(values);
  return *this;
}

std::string RangeText(const ArgSpec& spec) {
  if (spec.min.has_value() && spec.max.has_value()) {
    return absl::StrCat(spec.min_exclusive ? "(" : "[", *spec.min, ", ",
                        *spec.max, "]");
  }
  if (spec.min.has_value()) {
    return absl::StrCat(spec.min_exclusive ? "> " : ">= ", *spec.min);
  }
  if (spec.max.has_value()) return absl::StrCat("<= ", *spec.max);
  return "";
}

std::string ChoicesText(const ArgSpec& spec) {
  const std::vector<std::string>& c = spec.choices;
  if (c.size() <= 1) return c.empty() ? "" : c[0];
  return absl::StrCat(absl::StrJoin(c.begin(), c.end() - 1, ", "), " or ",
                      c.back());
}

std::optional<ArgValueProblem> CheckArgValue(const ArgSpec& spec,
                                             const ArgValue& value) {
  if (!spec.choices.empty()) {
    const auto* s = std::get_if<std::string>(&value);
    if (s != nullptr && std::find(spec.choices.begin(), spec.choices.end(),
                                  *s) == spec.choices.end()) {
      return ArgValueProblem{-1, ChoicesText(spec)};
    }
  }
  if (!HasRange(spec)) return std::nullopt;
  const std::vector<double> numbers = NumbersOf(value);
  const bool is_list = std::holds_alternative<std::vector<double>>(value);
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (InRange(spec, numbers[i])) continue;
    const std::string range = RangeText(spec);
    const absl::string_view in =
        spec.min.has_value() && spec.max.has_value() ? "in " : "";
    if (is_list) {
      return ArgValueProblem{static_cast<int>(i),
                             absl::StrCat("values ", in, range)};
    }
    return ArgValueProblem{
        -1,
        absl::StrCat(spec.type == ArgType::kInt ? "an integer " : "a number ",
                     in, range)};
  }
  return std::nullopt;
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* const registry = new OpRegistry();
  return *registry;
}

absl::Status OpRegistry::Register(OpDef def) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("op definition '", def.name, "': ", why));
  };
  if (!IsOpName(def.name)) return invalid("name must match [a-z0-9_]+");
  if (!def.factory) return invalid("no factory");
  if (def.example.empty()) return invalid("no example");
  if ((def.kind == OpKind::kPixel || def.kind == OpKind::kTensor ||
       def.kind == OpKind::kBatch) &&
      !def.binds_field) {
    return invalid(absl::StrCat("a ", std::string(OpKindName(def.kind)),
                                " op works on a field; set binds_field"));
  }
  if (def.binds_field) {
    for (const ArgSpec& arg : def.args) {
      if (arg.name == kFieldArg) {
        return invalid("declares 'field' itself; binds_field adds it");
      }
    }
    def.args.push_back(ArgSpec::Optional(kFieldArg, ArgType::kString,
                                         ArgValue(std::string("image")),
                                         "The record field the op works on."));
  }
  std::set<std::string> names;
  for (const ArgSpec& arg : def.args) {
    if (const std::string problem = SpecProblem(arg); !problem.empty()) {
      return invalid(problem);
    }
    if (!names.insert(arg.name).second) {
      return invalid(absl::StrCat("argument '", arg.name, "' twice"));
    }
  }
  if (!def.scalar_arg.empty() && names.count(def.scalar_arg) == 0) {
    return invalid(
        absl::StrCat("scalar_arg '", def.scalar_arg, "' is not an argument"));
  }
  absl::MutexLock lock(&mu_);
  if (defs_.count(def.name) != 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("op '", def.name, "' is already registered"));
  }
  std::string name = def.name;
  defs_.emplace(std::move(name), std::make_unique<OpDef>(std::move(def)));
  return absl::OkStatus();
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  const auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  names.reserve(defs_.size());
  for (const auto& [name, def] : defs_) names.push_back(name);
  return names;
}

absl::StatusOr<OpArgs> ResolveArgs(const OpDef& def, const OpArgs& given) {
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const ArgSpec& spec : def.args) known = known || spec.name == name;
    if (!known) {
      std::vector<absl::string_view> names;
      for (const ArgSpec& spec : def.args) names.push_back(spec.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "op '", def.name, "': unknown argument '", name, "'",
          names.empty()
              ? " (it takes none)"
              : absl::StrCat(" (it takes: ", absl::StrJoin(names, ", "), ")")));
    }
  }
  OpArgs resolved;
  for (const ArgSpec& spec : def.args) {
    const auto it = given.find(spec.name);
    if (it == given.end()) {
      if (spec.required) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", def.name, "': missing required argument '",
                         spec.name, "'"));
      }
      if (spec.default_value.has_value()) {
        // Register checked that the default converts.
        resolved[spec.name] = *Canonical(spec.type, *spec.default_value);
      }
      continue;
    }
    absl::StatusOr<ArgValue> value = Canonical(spec.type, it->second);
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", def.name, "': argument '", spec.name, "' ",
                       value.status().message()));
    }
    if (std::optional<ArgValueProblem> problem = CheckArgValue(spec, *value)) {
      const std::vector<double> numbers = NumbersOf(*value);
      const std::string got =
          problem->element >= 0 &&
                  std::holds_alternative<std::vector<double>>(it->second)
              ? absl::StrCat(numbers[problem->element], " at [",
                             problem->element, "]")
          : std::holds_alternative<std::string>(*value)
              ? absl::StrCat("'", std::get<std::string>(*value), "'")
              : absl::StrCat(numbers.empty() ? 0 : numbers[0]);
      return absl::InvalidArgumentError(
          absl::StrCat("op '", def.name, "': argument '", spec.name,
                       "' expects ", problem->expected, ", got ", got));
    }
    resolved[spec.name] = *std::move(value);
  }
  return resolved;
}

absl::StatusOr<std::vector<int>> ParseSizeArg(absl::string_view op,
                                              absl::string_view arg,
                                              const OpArgs& args) {
  const auto* values = FindArg<std::vector<double>>(args, std::string(arg));
  if (values == nullptr || values->empty() || values->size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op '", op, "': argument '", arg, "' must be an int or [h, w]"));
  }
  std::vector<int> sizes;
  for (double v : *values) {
    if (!(v >= 1 && v <= kMaxImageSide) || v != static_cast<int>(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "': argument '", arg, "' must hold whole ",
                       "numbers in [1, ", kMaxImageSide, "], not ", v));
    }
    sizes.push_back(static_cast<int>(v));
  }
  return sizes;
}

ArgSpec InterpolationArg() {
  return ArgSpec::Optional("interpolation", ArgType::kString,
                           ArgValue(std::string("bilinear")),
                           "How the image is resampled to the output size, as "
                           "torchvision's InterpolationMode (bicubic: OpenCV's "
                           "a = -0.75 kernel, as torch's tensor bicubic).")
      .OneOf({"bilinear", "bicubic"});
}

Interpolation ParseInterpolationArg(const OpArgs& args) {
  return *FindArg<std::string>(args, "interpolation") == "bicubic"
             ? Interpolation::kBicubic
             : Interpolation::kBilinear;
}

OpRegistrar::OpRegistrar(OpDef def) {
  const absl::Status status = OpRegistry::Global().Register(std::move(def));
  if (!status.ok()) {
    std::fprintf(stderr, "stoker: cannot register op: %s\n",
                 status.ToString().c_str());
    std::abort();
  }
}

}  // namespace stoker::pipeline
