// The op registry: every op's name, kind, documentation, arguments (with
// their types, defaults, ranges and choices), an example and its factory.
//
// An op registers itself from its own file in ops/ with one line,
//   STOKER_REGISTER_OP(MakeRandomFlipDef);
// where MakeRandomFlipDef() returns its OpDef. The declaration is the one
// place an argument's rules live: the config loader checks values against
// it and reports mistakes at their YAML line and column, ResolveArgs checks
// the same rules for callers without a file, Pipeline::Create builds ops
// from it, and `stokerd --help-config` prints it.
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
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/pipeline/op.h"

namespace stoker::pipeline {

using ArgValue = std::variant<bool, int64_t, double, std::string,
                              std::vector<double>, std::vector<std::string>>;

enum class ArgType {
  kBool,
  kInt,
  kFloat,  // An int is accepted and stored as double.
  kString,
  kFloatList,    // Ints in the list are stored as doubles.
  kIntOrPair,    // n or [h, w]; stored as a vector<double> of 1 or 2 values.
  kFloatOrPair,  // x or [lo, hi]; stored as a vector<double> of 1 or 2.
  kStringList,   // [a, b]; stored as a vector<std::string>.
};

// "bool", "int", "float", "string", "float list", "int or [h, w]",
// "float or [lo, hi]", "string list".
std::string_view ArgTypeName(ArgType type);

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kInt;
  bool required = false;
  std::optional<ArgValue> default_value;  // Only for optional args.
  std::string doc;                        // One line.
  // Bounds on a number, or on each number of a list or pair (kInt, kFloat,
  // kFloatList, kIntOrPair, kFloatOrPair); inclusive unless marked
  // exclusive.
  std::optional<double> min, max;
  bool min_exclusive = false;
  // The values a kString may take, in the order --help-config lists them;
  // empty: any string.
  std::vector<std::string> choices;

  // Builders, so that a declaration reads as one line per argument:
  //   ArgSpec::Optional("p", ArgType::kFloat, 0.5, "...").Between(0, 1)
  static ArgSpec Required(std::string name, ArgType type, std::string doc);
  static ArgSpec Optional(std::string name, ArgType type,
                          std::optional<ArgValue> default_value,
                          std::string doc);
  ArgSpec& Between(double lo, double hi);  // lo <= v <= hi.
  ArgSpec& AtLeast(double lo);             // lo <= v.
  ArgSpec& Above(double lo);               // lo < v.
  ArgSpec& AtMost(double hi);              // v <= hi.
  ArgSpec& OneOf(std::vector<std::string> values);
};

// The range of `spec` as --help-config and messages write it: "[0, 1]",
// "(0, 1]", ">= 1", "> 0", "<= 8"; empty when it has none.
std::string RangeText(const ArgSpec& spec);

// The choices of `spec` as messages write them: "chw or hwc",
// "float32, float16 or uint8"; empty when it has none.
std::string ChoicesText(const ArgSpec& spec);

// Why a value of the right type breaks the range or choices of its spec.
struct ArgValueProblem {
  // The offending element of a list or pair; -1 for a scalar value.
  int element = -1;
  // What was allowed, to follow "expected": "a number in [0, 1]",
  // "values > 0" (for a list or pair), "chw or hwc".
  std::string expected;
};

// Checks `value`, in the canonical form of spec.type (see ResolveArgs),
// against spec's range and choices; nullopt when it keeps to them.
std::optional<ArgValueProblem> CheckArgValue(const ArgSpec& spec,
                                             const ArgValue& value);

using OpArgs = std::map<std::string, ArgValue>;

// The argument a field-binding op gets from the registry (binds_field).
inline constexpr char kFieldArg[] = "field";

struct OpDef {
  std::string name;
  OpKind kind = OpKind::kGeometry;
  std::string doc;
  std::vector<ArgSpec> args;
  // The op works on one record field, named by an argument `field` (default
  // "image") that Register adds with one shared doc; the op must not
  // declare it itself.
  bool binds_field = false;
  // One pipeline step using the op, as it is written in YAML, e.g.
  // "random_flip: {p: 0.5}". --help-config prints it and a test loads it.
  std::string example;
  // The arg that a YAML scalar fills (`- layout: chw` sets layout's
  // "value"); empty when the op takes no scalar form.
  std::string scalar_arg;
  // Builds the op from resolved args (see ResolveArgs). InvalidArgument,
  // naming the op and the argument, for values out of range.
  std::function<absl::StatusOr<AnyOp>(const OpArgs&)> factory;
};

class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // The registry that STOKER_REGISTER_OP fills and pipelines use.
  static OpRegistry& Global();

  // AlreadyExists when an op of that name is registered; InvalidArgument
  // for a malformed definition (no name, factory or example, duplicate arg
  // names, a default of the wrong type, out of its range or on a required
  // arg, a range on a non-number or choices on a non-string, an unknown
  // scalar_arg, a `field` argument declared beside binds_field, a pixel,
  // tensor or batch op that does not bind a field).
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
// missing required argument, a value of the wrong type or one outside the
// argument's range or choices (CheckArgValue). Ints given for
// floats become doubles, a number for kIntOrPair or kFloatOrPair becomes a
// one-element list,
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

// The values of a size argument of type kIntOrPair: one (n) or two
// ([height, width]). InvalidArgument naming the op and the argument unless
// each is a whole number in [1, kMaxImageSide].
inline constexpr int kMaxImageSide = 16384;
absl::StatusOr<std::vector<int>> ParseSizeArg(absl::string_view op,
                                              absl::string_view arg,
                                              const OpArgs& args);

// The `interpolation` argument of the ops that set the output size (resize,
// random_resized_crop): bilinear (the default) or bicubic, as torchvision's
// InterpolationMode names them. ParseInterpolationArg reads it back.
ArgSpec InterpolationArg();
Interpolation ParseInterpolationArg(const OpArgs& args);

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
