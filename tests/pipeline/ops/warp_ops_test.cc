// Tests of the warp ops rotate, affine, shear and translate: their
// arguments, their random draws and where they sit against the flip. Their
// pixels are held against torchvision by tests/python/test_op_parity.py.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/kernels/warp.h"
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

constexpr int kSide = 16;

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

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

const std::string& Png() {
  static const std::string* png = new std::string(
      ::stoker::testing::MakePng(kSide, kSide,
                                 ::stoker::testing::PngColor::kRgb, 8, false, 3)
          .bytes);
  return *png;
}

// decode_image -> center_crop (the whole image) -> `ops` -> uint8 HWC, for
// sample `id`.
std::string RunOps(const std::vector<OpConfig>& ops, uint64_t id) {
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
  const std::string_view fields[] = {Png()};
  SampleRng rng(7, 2, id);
  EXPECT_THAT((*bound)->Run(fields, rng, dst, nullptr), IsOk());
  return out;
}

ImageBuffer Buffer(std::string& image) {
  return {reinterpret_cast<uint8_t*>(image.data()), kSide * 3, kSide, kSide, 3};
}

TEST(WarpOpsTest, RejectBadValuesByName) {
  ExpectInvalid("rotate", {}, "degrees");
  ExpectInvalid("rotate", {{"degrees", -5.0}}, "degrees");
  ExpectInvalid("rotate", {{"degrees", Floats{10, 5}}}, "degrees");
  ExpectInvalid("rotate", {{"degrees", 5.0}, {"fill", Floats{1, 2}}}, "fill");
  ExpectInvalid("rotate", {{"degrees", 5.0}, {"fill", Floats{256}}}, "fill");
  ExpectInvalid("rotate", {{"degrees", 5.0}, {"center", Floats{1}}}, "center");
  ExpectInvalid("rotate",
                {{"degrees", 5.0}, {"interpolation", std::string("bicubic")}},
                "interpolation");
  ExpectInvalid("rotate", {{"degrees", 5.0}, {"p", 1.5}}, "p");
  ExpectInvalid("affine", {{"degrees", 0.0}, {"shear", Floats{1, 2, 3}}},
                "shear");
  ExpectInvalid("affine", {{"degrees", 0.0}, {"shear", Floats{1, 0, 0, 1}}},
                "shear");
  ExpectInvalid("affine", {{"degrees", 0.0}, {"translate", Floats{0.5}}},
                "translate");
  ExpectInvalid("affine", {{"degrees", 0.0}, {"translate", Floats{1.5, 0}}},
                "translate");
  ExpectInvalid("affine", {{"degrees", 0.0}, {"scale", Floats{0, 1}}}, "scale");
  ExpectInvalid("affine", {{"degrees", 0.0}, {"scale", Floats{2, 1}}}, "scale");
  ExpectInvalid("shear", {{"x", -1.0}}, "x");
  ExpectInvalid("shear", {{"y", Floats{3, 1}}}, "y");
  ExpectInvalid("translate", {{"x", 2.0}}, "x");
  ExpectInvalid("translate", {{"center", Floats{1, 1}}}, "center");
  EXPECT_THAT(MakeOp("affine", {{"degrees", Floats{-5, 5}},
                                {"translate", Floats{0.1, 0.2}},
                                {"scale", Floats{0.9, 1.1}},
                                {"shear", Floats{-2, 2, -3, 3}},
                                {"fill", Floats{1, 2, 3}},
                                {"center", Floats{4, 5}}}),
              IsOk());
}

TEST(WarpOpsTest, AreNotFlipInvariant) {
  for (const auto& [name, args] : std::vector<std::pair<std::string, OpArgs>>{
           {"rotate", {{"degrees", 5.0}}},
           {"affine", {{"degrees", 5.0}}},
           {"shear", {{"x", 5.0}}},
           {"translate", {{"x", 0.1}}}}) {
    absl::StatusOr<AnyOp> op = MakeOp(name, args);
    ASSERT_THAT(op, IsOk()) << name;
    EXPECT_FALSE(std::get<std::unique_ptr<PixelOp>>(*op)->flip_invariant())
        << name;
  }
}

TEST(WarpOpsTest, RotateSeesTheFlippedImage) {
  // torchvision runs RandomHorizontalFlip, then RandomRotation: rotating
  // the mirrored image, not mirroring the rotated one.
  std::string want = RunOps({}, 0);
  {
    // Mirror, then turn by 90 degrees, by hand.
    std::string mirrored = want;
    for (int y = 0; y < kSide; ++y) {
      for (int x = 0; x < kSide; ++x) {
        for (int c = 0; c < 3; ++c) {
          mirrored[(y * kSide + x) * 3 + c] =
              want[(y * kSide + kSide - 1 - x) * 3 + c];
        }
      }
    }
    want = mirrored;
    kernels::Rotate(Buffer(want), 90, kernels::WarpInterpolation::kNearest,
                    std::array<float, 3>{0, 0, 0});
  }
  const std::string got = RunOps({Op("random_flip", {{"p", 1.0}}),
                                  Op("rotate", {{"degrees", Floats{90, 90}}})},
                                 0);
  EXPECT_EQ(got, want);
}

TEST(WarpOpsTest, DrawFromTheSampleGeneratorWithProbabilityP) {
  const std::string plain = RunOps({}, 0);
  const std::vector<std::pair<std::string, OpArgs>> ops = {
      {"rotate", {{"degrees", Floats{20, 40}}}},
      {"affine", {{"degrees", Floats{5, 40}}, {"scale", Floats{0.6, 0.9}}}},
      {"shear", {{"x", Floats{10, 30}}}},
      {"translate", {{"x", 0.5}, {"y", 0.5}}},
  };
  for (const auto& [name, args] : ops) {
    OpArgs sometimes = args;
    sometimes["p"] = 0.3;
    int changed = 0;
    std::set<std::string> outcomes;
    for (uint64_t id = 0; id < 300; ++id) {
      const std::string image = RunOps({Op(name, sometimes)}, id);
      changed += image != plain;
      outcomes.insert(image);
      // The same sample draws the same warp.
      if (id < 5) {
        EXPECT_EQ(image, RunOps({Op(name, sometimes)}, id)) << name;
      }
    }
    EXPECT_NEAR(changed, 90, 30) << name;
    // The parameters vary from sample to sample.
    EXPECT_GT(outcomes.size(), 10u) << name;
  }
}

TEST(WarpOpsTest, TranslateShiftsByWholePixelsWithinTheRange) {
  // x: 0.25 of 16 pixels: round(uniform(-4, 4)), each of -4..4 possible,
  // the ends half as often as the others.
  const std::string plain = RunOps({}, 0);
  std::vector<std::string> shifted(9);
  for (int dx = -4; dx <= 4; ++dx) {
    shifted[dx + 4] = plain;
    kernels::Affine(Buffer(shifted[dx + 4]), 0, dx, 0, 1, 0, 0,
                    kernels::WarpInterpolation::kNearest,
                    std::array<float, 3>{0, 0, 0});
  }
  std::vector<int> counts(9);
  for (uint64_t id = 0; id < 800; ++id) {
    const std::string image = RunOps({Op("translate", {{"x", 0.25}})}, id);
    int found = -1;
    for (int k = 0; k < 9; ++k) {
      if (image == shifted[k]) found = k;
    }
    ASSERT_GE(found, 0) << "sample " << id << " is no whole-pixel shift";
    ++counts[found];
  }
  EXPECT_NEAR(counts[0], 50, 25);
  EXPECT_NEAR(counts[8], 50, 25);
  for (int k = 1; k < 8; ++k) EXPECT_NEAR(counts[k], 100, 35) << k - 4;
}

}  // namespace
}  // namespace stoker::pipeline
