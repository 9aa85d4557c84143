#include "server/pipeline/registry.h"

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
  }
  return mismatch();
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
  }
  return "unknown";
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
  std::set<std::string> names;
  for (const ArgSpec& arg : def.args) {
    if (arg.name.empty()) return invalid("an argument has no name");
    if (!names.insert(arg.name).second) {
      return invalid(absl::StrCat("argument '", arg.name, "' twice"));
    }
    if (!arg.default_value.has_value()) continue;
    if (arg.required) {
      return invalid(
          absl::StrCat("required argument '", arg.name, "' has a default"));
    }
    if (!Canonical(arg.type, *arg.default_value).ok()) {
      return invalid(absl::StrCat("default of '", arg.name, "' is not ",
                                  std::string(ArgTypeName(arg.type))));
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
    resolved[spec.name] = *std::move(value);
  }
  return resolved;
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
