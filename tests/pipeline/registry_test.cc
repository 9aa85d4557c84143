#include "server/pipeline/registry.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/op.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

class NothingOp final : public GeometryOp {
 public:
  absl::Status Apply(View&, SampleRng&) const override {
    return absl::OkStatus();
  }
};

OpDef TestDef(std::string name) {
  OpDef def;
  def.name = std::move(name);
  def.doc = "Does nothing.";
  def.args = {
      ArgSpec::Required("count", ArgType::kInt, "Required int."),
      ArgSpec::Optional("gain", ArgType::kFloat, ArgValue(1.5),
                        "Float with default."),
      ArgSpec::Optional("size", ArgType::kIntOrPair, std::nullopt,
                        "Optional size."),
      ArgSpec::Optional("mode", ArgType::kString, std::nullopt,
                        "Optional string."),
  };
  def.example = "t: {count: 1}";
  def.factory = [](const OpArgs&) -> absl::StatusOr<AnyOp> {
    return AnyOp(std::make_unique<NothingOp>());
  };
  return def;
}

// TestDef with declared ranges and choices.
OpDef BoundedDef() {
  OpDef def = TestDef("bounded");
  def.args = {
      ArgSpec::Optional("p", ArgType::kFloat, ArgValue(0.5), "A probability.")
          .Between(0, 1),
      ArgSpec::Optional("n", ArgType::kInt, std::nullopt, "At least 2.")
          .AtLeast(2),
      ArgSpec::Optional("scale", ArgType::kFloatList, std::nullopt,
                        "Positive fractions.")
          .Above(0)
          .AtMost(1),
      ArgSpec::Optional("size", ArgType::kIntOrPair, std::nullopt, "Sides.")
          .Between(1, 64),
      ArgSpec::Optional("mode", ArgType::kString, ArgValue(std::string("a")),
                        "A mode.")
          .OneOf({"a", "b", "c"}),
  };
  return def;
}

TEST(OpRegistryTest, FindsWhatWasRegistered) {
  OpRegistry registry;
  ASSERT_THAT(registry.Register(TestDef("b_op")), IsOk());
  ASSERT_THAT(registry.Register(TestDef("a_op")), IsOk());
  const OpDef* def = registry.Find("a_op");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->doc, "Does nothing.");
  EXPECT_EQ(registry.Find("c_op"), nullptr);
  EXPECT_THAT(registry.Names(), ElementsAre("a_op", "b_op"));
}

TEST(OpRegistryTest, RejectsDuplicateNames) {
  OpRegistry registry;
  ASSERT_THAT(registry.Register(TestDef("twice")), IsOk());
  EXPECT_THAT(registry.Register(TestDef("twice")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("twice")));
}

TEST(OpRegistryTest, RejectsMalformedDefinitions) {
  OpRegistry registry;
  OpDef no_factory = TestDef("no_factory");
  no_factory.factory = nullptr;
  EXPECT_THAT(
      registry.Register(no_factory),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no factory")));

  OpDef bad_name = TestDef("Bad-Name");
  EXPECT_THAT(registry.Register(bad_name),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("name")));

  OpDef twice = TestDef("twice_arg");
  twice.args.push_back(twice.args[0]);
  EXPECT_THAT(
      registry.Register(twice),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'count' twice")));

  OpDef required_default = TestDef("required_default");
  required_default.args[0].default_value = ArgValue(int64_t{3});
  EXPECT_THAT(registry.Register(required_default),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("required argument 'count' has a default")));

  OpDef wrong_default = TestDef("wrong_default");
  wrong_default.args[1].default_value = ArgValue(std::string("fast"));
  EXPECT_THAT(registry.Register(wrong_default),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("default of 'gain'")));

  OpDef bad_scalar = TestDef("bad_scalar");
  bad_scalar.scalar_arg = "value";
  EXPECT_THAT(registry.Register(bad_scalar),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("scalar_arg 'value'")));

  OpDef no_example = TestDef("no_example");
  no_example.example.clear();
  EXPECT_THAT(
      registry.Register(no_example),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no example")));
  EXPECT_TRUE(registry.Names().empty());
}

TEST(OpRegistryTest, RejectsUnsoundRangesAndChoices) {
  OpRegistry registry;
  const auto rejects = [&](OpDef def, const std::string& why) {
    EXPECT_THAT(registry.Register(std::move(def)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)));
  };
  OpDef range_on_string = BoundedDef();
  range_on_string.args[4].Between(0, 1);
  rejects(range_on_string, "'mode' has a range but is not a number");

  OpDef choices_on_float = BoundedDef();
  choices_on_float.args[0].OneOf({"x"});
  rejects(choices_on_float, "'p' has choices but is not a string");

  OpDef empty_range = BoundedDef();
  empty_range.args[0].Between(1, 0);
  rejects(empty_range, "'p' has an empty range [1, 0]");
  empty_range.args[0].Above(1).AtMost(1);
  rejects(empty_range, "'p' has an empty range (1, 1]");

  OpDef default_outside = BoundedDef();
  default_outside.args[0].default_value = ArgValue(1.5);
  rejects(default_outside, "default of 'p' is not a number in [0, 1]");

  OpDef default_not_a_choice = BoundedDef();
  default_not_a_choice.args[4].default_value = ArgValue(std::string("d"));
  rejects(default_not_a_choice, "default of 'mode' is not a, b or c");

  OpDef own_field = TestDef("own_field");
  own_field.binds_field = true;
  own_field.args.push_back(ArgSpec::Optional(
      "field", ArgType::kString, std::nullopt, "Declared by hand."));
  rejects(own_field, "binds_field adds it");

  OpDef unbound_pixel_op = TestDef("unbound");
  unbound_pixel_op.kind = OpKind::kPixel;
  rejects(unbound_pixel_op, "a pixel op works on a field; set binds_field");
  EXPECT_TRUE(registry.Names().empty());
}

TEST(OpRegistryTest, BindsFieldAddsAFieldArgumentDefaultingToImage) {
  OpRegistry registry;
  OpDef def = TestDef("binder");
  def.binds_field = true;
  ASSERT_THAT(registry.Register(def), IsOk());
  const OpDef* registered = registry.Find("binder");
  ASSERT_NE(registered, nullptr);
  ASSERT_EQ(registered->args.size(), def.args.size() + 1);
  const ArgSpec& field = registered->args.back();
  EXPECT_EQ(field.name, "field");
  EXPECT_EQ(field.type, ArgType::kString);
  EXPECT_EQ(field.default_value, ArgValue(std::string("image")));
  absl::StatusOr<OpArgs> args =
      ResolveArgs(*registered, {{"count", int64_t{1}}});
  ASSERT_THAT(args, IsOk());
  EXPECT_EQ(*FindArg<std::string>(*args, "field"), "image");
}

TEST(ArgSpecTest, WritesRangesAndChoicesAsMessagesDo) {
  const OpDef def = BoundedDef();
  EXPECT_EQ(RangeText(def.args[0]), "[0, 1]");
  EXPECT_EQ(RangeText(def.args[1]), ">= 2");
  EXPECT_EQ(RangeText(def.args[2]), "(0, 1]");
  EXPECT_EQ(RangeText(ArgSpec().Above(0)), "> 0");
  EXPECT_EQ(RangeText(ArgSpec().AtMost(8)), "<= 8");
  EXPECT_EQ(RangeText(def.args[4]), "");
  EXPECT_EQ(ChoicesText(def.args[4]), "a, b or c");
  EXPECT_EQ(ChoicesText(ArgSpec().OneOf({"chw", "hwc"})), "chw or hwc");
  EXPECT_EQ(ChoicesText(def.args[0]), "");
}

TEST(ArgSpecTest, CheckArgValueNamesTheElementAndWhatWasAllowed) {
  const OpDef def = BoundedDef();
  EXPECT_FALSE(CheckArgValue(def.args[0], ArgValue(1.0)).has_value());
  std::optional<ArgValueProblem> problem =
      CheckArgValue(def.args[0], ArgValue(1.5));
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->element, -1);
  EXPECT_EQ(problem->expected, "a number in [0, 1]");

  problem = CheckArgValue(def.args[1], ArgValue(int64_t{1}));
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->expected, "an integer >= 2");

  problem = CheckArgValue(def.args[2], ArgValue(std::vector<double>{1, 0}));
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->element, 1);
  EXPECT_EQ(problem->expected, "values in (0, 1]");

  problem = CheckArgValue(def.args[4], ArgValue(std::string("d")));
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->expected, "a, b or c");
  EXPECT_FALSE(
      CheckArgValue(def.args[4], ArgValue(std::string("b"))).has_value());
  // NaN is in no range.
  EXPECT_TRUE(CheckArgValue(def.args[0], ArgValue(std::nan(""))).has_value());
}

// Nothing in this test binary refers to the ops' files: they are only
// here because stoker_pipeline links stoker_ops as a whole archive.
TEST(OpRegistryTest, GlobalRegistryHoldsEveryBuiltInOp) {
  EXPECT_THAT(OpRegistry::Global().Names(),
              IsSupersetOf({"center_crop", "decode_jpeg", "layout", "normalize",
                            "random_flip", "random_resized_crop", "resize"}));
  const OpDef* layout = OpRegistry::Global().Find("layout");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(layout->scalar_arg, "value");
}

TEST(OpRegistryTest, GlobalRegistryRejectsASecondDecodeJpeg) {
  OpDef def = TestDef("decode_jpeg");
  EXPECT_THAT(
      OpRegistry::Global().Register(def),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("decode_jpeg")));
}

TEST(ResolveArgsTest, FillsDefaultsAndCanonicalizesTypes) {
  const OpDef def = TestDef("t");
  absl::StatusOr<OpArgs> args =
      ResolveArgs(def, {{"count", int64_t{4}}, {"size", int64_t{224}}});
  ASSERT_THAT(args, IsOk());
  EXPECT_EQ(*FindArg<int64_t>(*args, "count"), 4);
  EXPECT_EQ(*FindArg<double>(*args, "gain"), 1.5);
  EXPECT_THAT(*FindArg<std::vector<double>>(*args, "size"), ElementsAre(224.0));
  EXPECT_EQ(FindArg<std::string>(*args, "mode"), nullptr);

  args = ResolveArgs(def, {{"count", int64_t{1}}, {"gain", int64_t{2}}});
  ASSERT_THAT(args, IsOk());
  EXPECT_EQ(*FindArg<double>(*args, "gain"), 2.0);
}

TEST(ResolveArgsTest, RejectsValuesOutsideTheirRangeOrChoices) {
  const OpDef def = BoundedDef();
  EXPECT_THAT(ResolveArgs(def, {{"p", 1.5}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'bounded': argument 'p' expects a number "
                                 "in [0, 1], got 1.5")));
  EXPECT_THAT(ResolveArgs(def, {{"scale", std::vector<double>{0.5, 0}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 'scale' expects values in (0, 1], "
                                 "got 0 at [1]")));
  EXPECT_THAT(ResolveArgs(def, {{"size", int64_t{0}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 'size' expects values in [1, 64], "
                                 "got 0")));
  EXPECT_THAT(ResolveArgs(def, {{"mode", std::string("z")}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 'mode' expects a, b or c, got "
                                 "'z'")));
  EXPECT_THAT(ResolveArgs(def, {{"p", int64_t{1}},
                                {"size", std::vector<double>{1, 64}},
                                {"mode", std::string("c")}}),
              IsOk());
}

TEST(ResolveArgsTest, RejectsUnknownMissingAndMistypedArguments) {
  const OpDef def = TestDef("t");
  EXPECT_THAT(ResolveArgs(def, {{"count", int64_t{1}}, {"cuont", true}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown argument 'cuont'")));
  EXPECT_THAT(ResolveArgs(def, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing required argument 'count'")));
  EXPECT_THAT(ResolveArgs(def, {{"count", 1.5}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'count' expects int")));
  EXPECT_THAT(ResolveArgs(def, {{"count", int64_t{1}},
                                {"size", std::vector<double>{1, 2, 3}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'size' expects int or [h, w]")));
  EXPECT_THAT(ResolveArgs(def, {{"count", int64_t{1}},
                                {"size", std::vector<double>{2.5}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'size' expects int or [h, w]")));
}

}  // namespace
}  // namespace stoker::pipeline
