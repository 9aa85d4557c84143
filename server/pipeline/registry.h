// The op registry: every op's name, documentation, arguments and factory.
//
// An op registers itself from its own file in ops/ with one line,
//   STOKER_REGISTER_OP(MakeRandomFlipDef);
// where MakeRandomFlipDef() returns its OpDef. The config loader checks op
// names and arguments against the registry (ResolveArgs) and reports
// mistakes with their YAML line; Pipeline::Create builds ops from it.
//
// Thread-safety: OpRegistry is thread-safe. Definitions are never removed,
// so a pointer from Find stays valid as long as the registry.
#ifndef STOKER_SERVER_PIPELINE_REGISTRY_H_
#define STOKER_SERVER_PIPELINE_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace stoker::pipeline {

class Op;

using ArgValue =
    std::variant<bool, int64_t, double, std::string, std::vector<double>>;

enum class ArgType {
  kBool,
  kInt,
  kFloat,  // An int is accepted and stored as double.
  kString,
  kFloatList,  // Ints in the list are stored as doubles.
  kIntOrPair,  // n or [h, w]; stored as a vector<double> of 1 or 2 values.
};

// "bool", "int", "float", "string", "float list", "int or [h, w]".
std::string_view ArgTypeName(ArgType type);

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kInt;
  bool required = false;
  std::optional<ArgValue> default_value;  // Only for optional args.
  std::string doc;
};

using OpArgs = std::map<std::string, ArgValue>;

struct OpDef {
  std::string name;
  std::string doc;
  std::vector<ArgSpec> args;
  // The arg that a YAML scalar fills (`- layout: chw` sets layout's
  // "value"); empty when the op takes no scalar form.
  std::string scalar_arg;
  // Builds the op from resolved args (see ResolveArgs). InvalidArgument,
  // naming the op and the argument, for values out of range.
  std::function<absl::StatusOr<std::unique_ptr<Op>>(const OpArgs&)> factory;
};

class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // The registry that STOKER_REGISTER_OP fills and pipelines use.
  static OpRegistry& Global();

  // AlreadyExists when an op of that name is registered; InvalidArgument
  // for a malformed definition (no name or factory, duplicate arg names, a
  // default of the wrong type or on a required arg, an unknown scalar_arg).
  absl::Status Register(OpDef def) ABSL_LOCKS_EXCLUDED(mu_);

  // The definition named `name`, or null.
  const OpDef* Find(std::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);

  // Registered names in sorted order.
  std::vector<std::string> Names() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> defs_
      ABSL_GUARDED_BY(mu_);
};

// Checks `given` against def.args and returns the complete argument set:
// InvalidArgument naming the op and the argument for an unknown name, a
// missing required argument or a value of the wrong type. Ints given for
// floats become doubles, an int for kIntOrPair becomes a one-element list,
// and defaults fill the optional arguments that were not given.
absl::StatusOr<OpArgs> ResolveArgs(const OpDef& def, const OpArgs& given);

// The value of a resolved argument, or null when it is absent (an optional
// argument without default that was not given).
// REQUIRES: if present, the value holds a T (true after ResolveArgs for the
// T of the argument's type).
template <typename T>
const T* FindArg(const OpArgs& args, const std::string& name) {
  const auto it = args.find(name);
  return it == args.end() ? nullptr : &std::get<T>(it->second);
}

// Registers a definition in OpRegistry::Global() while static objects are
// constructed, and aborts with the reason if that fails: a broken or
// duplicate op is a programming error, caught by every test binary.
class OpRegistrar {
 public:
  explicit OpRegistrar(OpDef def);
};

}  // namespace stoker::pipeline

// One line per op file: `def_fn` is a function returning the op's OpDef.
#define STOKER_REGISTER_OP(def_fn)                                           \
  static const ::stoker::pipeline::OpRegistrar stoker_op_registrar_##def_fn( \
      def_fn())

#endif  // STOKER_SERVER_PIPELINE_REGISTRY_H_
