#include "server/pipeline/registry.h"

#include <memory>
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

class NothingOp final : public Op {
 public:
  OpStage stage() const override { return OpStage::kGeometry; }
  absl::Status Apply(ImageState&, SampleRng&) const override {
    return absl::OkStatus();
  }
};

OpDef TestDef(std::string name) {
  OpDef def;
  def.name = std::move(name);
  def.doc = "Does nothing.";
  def.args = {
      {"count", ArgType::kInt, true, std::nullopt, "Required int."},
      {"gain", ArgType::kFloat, false, ArgValue(1.5), "Float with default."},
      {"size", ArgType::kIntOrPair, false, std::nullopt, "Optional size."},
      {"mode", ArgType::kString, false, std::nullopt, "Optional string."},
  };
  def.factory = [](const OpArgs&) -> absl::StatusOr<std::unique_ptr<Op>> {
    return std::make_unique<NothingOp>();
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
  EXPECT_TRUE(registry.Names().empty());
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
