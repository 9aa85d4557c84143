// Tests of the policy ops trivial_augment_wide, rand_augment and
// auto_augment: their arguments and that each draws per sample from the
// sample's generator. augment_space_test.cc checks the draws' distribution;
// tests/python/test_augment_space.py and test_op_parity.py the pixels.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/registry.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

constexpr int kSide = 24;

absl::StatusOr<AnyOp> MakeOp(const std::string& name, const OpArgs& given) {
  const OpDef* def = OpRegistry::Global().Find(name);
  if (def == nullptr) return absl::NotFoundError(name);
  absl::StatusOr<OpArgs> args = ResolveArgs(*def, given);
  if (!args.ok()) return args.status();
  return def->factory(*args);
}

void ExpectInvalid(const std::string& name, const OpArgs& args,
                   const std::string& arg) {
  EXPECT_THAT(MakeOp(name, args), StatusIs(absl::StatusCode::kInvalidArgument,
                                           AllOf(HasSubstr("'" + name + "'"),
                                                 HasSubstr("'" + arg + "'"))))
      << name << " with bad " << arg;
}

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

std::string RunOps(const std::vector<OpConfig>& ops, uint64_t id) {
  static const std::string* png = new std::string(
      ::stoker::testing::MakePng(kSide, kSide,
                                 ::stoker::testing::PngColor::kRgb, 8, false, 5)
          .bytes);
  std::vector<OpConfig> all = {Op("decode_image"),
                               Op("center_crop", {{"size", int64_t{kSide}}})};
  all.insert(all.end(), ops.begin(), ops.end());
  all.push_back(Op("normalize", {{"dtype", std::string("uint8")}}));
  auto pipeline = Pipeline::Create("p", all);
  EXPECT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind({InputField::Image("image")});
  EXPECT_THAT(bound, IsOk());
  std::string out((*bound)->outputs()[0].bytes(), '\0');
  uint8_t* dst[] = {reinterpret_cast<uint8_t*>(out.data())};
  const std::string_view fields[] = {*png};
  SampleRng rng(9, 4, id);
  EXPECT_THAT((*bound)->Run(fields, rng, dst, nullptr), IsOk());
  return out;
}

TEST(PolicyOpsTest, RejectBadValuesByName) {
  ExpectInvalid("trivial_augment_wide", {{"num_magnitude_bins", int64_t{1}}},
                "num_magnitude_bins");
  ExpectInvalid("trivial_augment_wide", {{"fill", Floats{1, 2}}}, "fill");
  ExpectInvalid("trivial_augment_wide",
                {{"interpolation", std::string("bicubic")}}, "interpolation");
  ExpectInvalid("rand_augment", {{"magnitude", int64_t{31}}}, "magnitude");
  ExpectInvalid(
      "rand_augment",
      {{"magnitude", int64_t{10}}, {"num_magnitude_bins", int64_t{10}}},
      "magnitude");
  ExpectInvalid("rand_augment", {{"magnitude_std", -0.5}}, "magnitude_std");
  ExpectInvalid("rand_augment", {{"op_prob", 1.5}}, "op_prob");
  ExpectInvalid("rand_augment", {{"num_ops", int64_t{-1}}}, "num_ops");
  ExpectInvalid("auto_augment", {{"policy", std::string("cifar10")}}, "policy");
  ExpectInvalid("auto_augment", {{"fill", Floats{300}}}, "fill");
  EXPECT_THAT(MakeOp("rand_augment", {{"magnitude", int64_t{9}},
                                      {"num_magnitude_bins", int64_t{11}},
                                      {"magnitude_std", 0.5},
                                      {"op_prob", 0.5},
                                      {"fill", Floats{124, 116, 104}}}),
              IsOk());
}

TEST(PolicyOpsTest, AreNotFlipInvariant) {
  for (const std::string name :
       {"trivial_augment_wide", "rand_augment", "auto_augment"}) {
    absl::StatusOr<AnyOp> op = MakeOp(name, {});
    ASSERT_THAT(op, IsOk()) << name;
    EXPECT_FALSE(std::get<std::unique_ptr<PixelOp>>(*op)->flip_invariant())
        << name;
  }
}

TEST(PolicyOpsTest, DrawPerSampleFromTheSampleGenerator) {
  const std::string plain = RunOps({}, 0);
  for (const std::string name :
       {"trivial_augment_wide", "rand_augment", "auto_augment"}) {
    std::set<std::string> outcomes;
    int changed = 0;
    for (uint64_t id = 0; id < 120; ++id) {
      const std::string image = RunOps({Op(name)}, id);
      outcomes.insert(image);
      changed += image != plain;
      if (id < 4) {
        EXPECT_EQ(image, RunOps({Op(name)}, id)) << name;
      }
    }
    // TA leaves the image as it is for Identity (1/14) and magnitude-0
    // bins; AA skips both steps about a quarter of the time.
    EXPECT_GT(changed, 60) << name;
    EXPECT_GT(outcomes.size(), 30u) << name;
  }
  // rand_augment with op_prob 0 or num_ops 0 never changes the image.
  for (uint64_t id = 0; id < 20; ++id) {
    EXPECT_EQ(RunOps({Op("rand_augment", {{"op_prob", 0.0}})}, id), plain);
    EXPECT_EQ(RunOps({Op("rand_augment", {{"num_ops", int64_t{0}}})}, id),
              plain);
  }
}

}  // namespace
}  // namespace stoker::pipeline
