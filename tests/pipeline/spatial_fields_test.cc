// Tests of a pipeline with several spatial fields (docs/pipeline-design.md
// §2.1): an image and a segmentation mask decoded side by side share one
// View, so random_resized_crop, random_flip and the warps make one choice
// for both; the mask (interpolation: nearest) is never averaged; colour ops
// touch only the field they name; the sizes must agree.
//
// The data encode their own coordinates: image pixel (x, y) is (x, y, 0),
// mask pixel (x, y) is (x, y, 255 * ((x + y) & 1)). A delivered mask pixel
// is a real source pixel exactly when its blue is the parity of its red and
// green (no averaging), and it is where the image pixel beside it came from
// when their red and green agree to within one output pixel.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::EncodeRgbPng;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

constexpr int kOut = 32;

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

// (x, y, blue(x, y)) for every pixel of a width x height picture.
std::string CoordinatePng(int width, int height, bool checkerboard_blue) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* px = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      px[0] = static_cast<uint8_t>(x);
      px[1] = static_cast<uint8_t>(y);
      px[2] = checkerboard_blue && ((x + y) & 1) ? 255 : 0;
    }
  }
  return EncodeRgbPng(width, height, rgb);
}

const std::vector<InputField> kSchema = {
    InputField::Image("image"), InputField::Image("mask"),
    InputField::Dense("label", tensor::DType::kInt64)};

std::vector<OpConfig> SegOps(std::vector<OpConfig> middle,
                             std::vector<OpConfig> tail = {}) {
  std::vector<OpConfig> ops = {
      Op("decode_image"),
      Op("decode_image", {{"field", std::string("mask")},
                          {"interpolation", std::string("nearest")}}),
      Op("random_resized_crop", {{"size", int64_t{kOut}}}),
      Op("random_flip"),
  };
  for (OpConfig& op : middle) ops.push_back(std::move(op));
  for (OpConfig& op : tail) ops.push_back(std::move(op));
  return ops;
}

std::unique_ptr<BoundPipeline> MustBind(const std::vector<OpConfig>& ops) {
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("seg", ops);
  EXPECT_THAT(pipeline, IsOk());
  if (!pipeline.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<BoundPipeline>> bound =
      (*pipeline)->Bind(kSchema);
  EXPECT_THAT(bound, IsOk());
  if (!bound.ok()) return nullptr;
  return *std::move(bound);
}

absl::StatusOr<std::vector<std::string>> RunSample(const BoundPipeline& bound,
                                                   const std::string& image,
                                                   const std::string& mask,
                                                   uint64_t sample_id) {
  std::vector<std::string> outputs;
  for (const tensor::TensorSpec& spec : bound.outputs()) {
    outputs.emplace_back(spec.bytes(), '\0');
  }
  std::vector<uint8_t*> dst;
  for (std::string& out : outputs) {
    dst.push_back(reinterpret_cast<uint8_t*>(out.data()));
  }
  const std::string label(8, '\0');
  const std::string_view fields[] = {image, mask, label};
  SampleRng rng(77, 1, sample_id);
  if (absl::Status s = bound.Run(fields, rng, dst, nullptr); !s.ok()) return s;
  return outputs;
}

struct Alignment {
  bool flipped = false;
  double worst_out_px = 0;  // Largest mismatch, in output pixels.
};

// Checks one sample's uint8 HWC outputs and measures how far apart the
// mask and the image are, in output pixels. The scale (source pixels per
// output pixel) is read from `unwarped`, the image of the same sample
// before any warp: the image itself when there is none.
Alignment CheckAligned(const std::string& image, const std::string& mask,
                       const std::string& unwarped) {
  Alignment result;
  const auto at = [](const std::string& t, int x, int y, int c) {
    return static_cast<uint8_t>(t[(static_cast<size_t>(y) * kOut + x) * 3 + c]);
  };
  // Source pixels per output pixel along each axis, from the image's
  // ramps along the middle row and column.
  const int mid = kOut / 2;
  const double step_x =
      std::abs(at(unwarped, kOut - 1, mid, 0) - at(unwarped, 0, mid, 0)) /
      (kOut - 1.0);
  const double step_y =
      std::abs(at(unwarped, mid, kOut - 1, 1) - at(unwarped, mid, 0, 1)) /
      (kOut - 1.0);
  result.flipped = at(unwarped, kOut - 1, mid, 0) < at(unwarped, 0, mid, 0);
  for (int y = 0; y < kOut; ++y) {
    for (int x = 0; x < kOut; ++x) {
      const int r = at(mask, x, y, 0), g = at(mask, x, y, 1);
      // A real mask pixel, not an average of neighbours.
      EXPECT_EQ(at(mask, x, y, 2), ((r + g) & 1) ? 255 : 0)
          << "mask pixel " << x << "," << y << " = " << r << "," << g;
      EXPECT_EQ(at(image, x, y, 2), 0);
      // The uint8 image rounds its interpolated coordinate: half a level.
      const double dx = std::max(0.0, std::abs(r - at(image, x, y, 0)) - 0.5);
      const double dy = std::max(0.0, std::abs(g - at(image, x, y, 1)) - 0.5);
      result.worst_out_px =
          std::max({result.worst_out_px, dx / std::max(step_x, 1.0),
                    dy / std::max(step_y, 1.0)});
    }
  }
  return result;
}

TEST(SpatialFieldsTest, MaskFollowsTheImageThroughCropAndFlip) {
  auto bound = MustBind(SegOps({}));
  ASSERT_NE(bound, nullptr);
  ASSERT_EQ(bound->outputs().size(), 3u);
  EXPECT_EQ(bound->outputs()[0].name, "image");
  EXPECT_EQ(bound->outputs()[1].name, "mask");
  EXPECT_EQ(bound->outputs()[1].dtype, tensor::DType::kUint8);
  const std::string image = CoordinatePng(200, 150, false);
  const std::string mask = CoordinatePng(200, 150, true);
  int flipped = 0;
  double worst = 0;
  for (uint64_t id = 0; id < 60; ++id) {
    auto out = RunSample(*bound, image, mask, id);
    ASSERT_THAT(out, IsOk());
    const Alignment a = CheckAligned((*out)[0], (*out)[1], (*out)[0]);
    flipped += a.flipped;
    worst = std::max(worst, a.worst_out_px);
    EXPECT_LE(a.worst_out_px, 1.0) << "sample " << id;
  }
  // Both branches of the flip were taken.
  EXPECT_GT(flipped, 10);
  EXPECT_LT(flipped, 50);
  RecordProperty("worst_out_px", std::to_string(worst));
}

TEST(SpatialFieldsTest, MaskFollowsTheImageThroughRotate) {
  auto plain = MustBind(SegOps({}));
  auto rotated = MustBind(SegOps({Op("rotate", {{"degrees", Floats{40}}})}));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(rotated, nullptr);
  const std::string image = CoordinatePng(180, 160, false);
  const std::string mask = CoordinatePng(180, 160, true);
  int differs = 0;
  double worst_seen = 0;
  for (uint64_t id = 0; id < 40; ++id) {
    auto a = RunSample(*plain, image, mask, id);
    auto b = RunSample(*rotated, image, mask, id);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    differs += (*a)[1] != (*b)[1];
    const double worst = CheckAligned((*b)[0], (*b)[1], (*a)[0]).worst_out_px;
    worst_seen = std::max(worst_seen, worst);
    EXPECT_LE(worst, 1.0) << "sample " << id;
  }
  // The warp moved the mask, not only the image.
  EXPECT_GT(differs, 35);
  RecordProperty("worst_out_px", std::to_string(worst_seen));
}

TEST(SpatialFieldsTest, PolicyWarpsMoveTheMaskAndColourOpsDoNot) {
  const std::string image = CoordinatePng(120, 100, false);
  const std::string mask = CoordinatePng(120, 100, true);
  auto plain = MustBind(SegOps({}));
  auto policy =
      MustBind(SegOps({Op("rand_augment", {{"num_ops", int64_t{3}}})}));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(policy, nullptr);
  int moved = 0;
  for (uint64_t id = 0; id < 40; ++id) {
    auto before = RunSample(*plain, image, mask, id);
    auto out = RunSample(*policy, image, mask, id);
    ASSERT_THAT(before, IsOk());
    ASSERT_THAT(out, IsOk());
    // The colour ops change the image's values, so only check the mask is
    // made of real pixels here (blue is the parity of red and green), and
    // that the geometric ops moved it in some samples.
    const std::string& m = (*out)[1];
    for (size_t i = 0; i < m.size(); i += 3) {
      const int r = static_cast<uint8_t>(m[i]),
                g = static_cast<uint8_t>(m[i + 1]);
      ASSERT_EQ(static_cast<uint8_t>(m[i + 2]), ((r + g) & 1) ? 255 : 0);
    }
    moved += m != (*before)[1];
  }
  // 5 of RandAugment's 14 ops are geometric; 3 ops per sample.
  EXPECT_GT(moved, 15);
  EXPECT_LT(moved, 40);
  // A colour op changes the image only.
  auto inverted =
      MustBind(SegOps({Op("solarize", {{"threshold", 0.0}, {"p", 1.0}})}));
  ASSERT_NE(inverted, nullptr);
  auto a = RunSample(*plain, image, mask, 5);
  auto b = RunSample(*inverted, image, mask, 5);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*a)[1], (*b)[1]);
  for (size_t i = 0; i < (*a)[0].size(); ++i) {
    ASSERT_EQ(static_cast<uint8_t>((*b)[0][i]),
              255 - static_cast<uint8_t>((*a)[0][i]));
  }
}

TEST(SpatialFieldsTest, TrivialAugmentMovesTheMaskWithTheImage) {
  // With colour ops that leave red and green alone (none does, in TA's
  // space, except the positional ones and Identity), only warped or
  // untouched samples can be compared; TA picks one op per sample, so the
  // mask's parity and its agreement with an untouched run show the warp.
  const std::string image = CoordinatePng(120, 100, false);
  const std::string mask = CoordinatePng(120, 100, true);
  auto plain = MustBind(SegOps({}));
  auto ta = MustBind(SegOps({Op("trivial_augment_wide")}));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(ta, nullptr);
  int moved = 0;
  double worst_seen = 0;
  for (uint64_t id = 0; id < 60; ++id) {
    auto a = RunSample(*plain, image, mask, id);
    auto b = RunSample(*ta, image, mask, id);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    if ((*a)[1] == (*b)[1]) continue;  // A colour op, or Identity.
    ++moved;
    // A warp: the image moved exactly as the mask did (both nearest, one
    // grid), so it still lines up.
    const double worst = CheckAligned((*b)[0], (*b)[1], (*a)[0]).worst_out_px;
    worst_seen = std::max(worst_seen, worst);
    EXPECT_LE(worst, 1.0) << "sample " << id;
  }
  EXPECT_GT(moved, 5);
  RecordProperty("worst_out_px", std::to_string(worst_seen));
}

TEST(SpatialFieldsTest, NormalizeAppliesToTheImageAndTheMaskStaysUint8) {
  const std::string image = CoordinatePng(90, 70, false);
  const std::string mask = CoordinatePng(90, 70, true);
  auto hwc = MustBind(SegOps({}));
  auto chw =
      MustBind(SegOps({}, {Op("normalize", {{"mean", Floats{0.5, 0.5, 0.5}},
                                            {"std", Floats{0.25, 0.25, 0.25}},
                                            {"dtype", std::string("float32")}}),
                           Op("layout", {{"value", std::string("chw")}})}));
  ASSERT_NE(hwc, nullptr);
  ASSERT_NE(chw, nullptr);
  EXPECT_EQ(chw->outputs()[0].dtype, tensor::DType::kFloat32);
  EXPECT_EQ(chw->outputs()[1].dtype, tensor::DType::kUint8);
  EXPECT_THAT(chw->outputs()[1].shape, ::testing::ElementsAre(3, kOut, kOut));
  auto a = RunSample(*hwc, image, mask, 9);
  auto b = RunSample(*chw, image, mask, 9);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  const size_t plane = kOut * kOut;
  for (size_t p = 0; p < plane; ++p) {
    for (size_t c = 0; c < 3; ++c) {
      ASSERT_EQ((*b)[1][c * plane + p], (*a)[1][p * 3 + c]);
      float v;
      std::memcpy(&v, (*b)[0].data() + (c * plane + p) * 4, 4);
      const double want =
          (static_cast<uint8_t>((*a)[0][p * 3 + c]) / 255.0 - 0.5) / 0.25;
      ASSERT_FLOAT_EQ(v, static_cast<float>(want));
    }
  }
}

TEST(SpatialFieldsTest, AMaskOfAnotherSizeIsDataLossNamingBothFields) {
  auto bound = MustBind(SegOps({}));
  ASSERT_NE(bound, nullptr);
  EXPECT_THAT(RunSample(*bound, CoordinatePng(200, 150, false),
                        CoordinatePng(200, 151, true), 0),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("field 'mask' is 200x151, 'image' is "
                                 "200x150")));
}

TEST(SpatialFieldsTest, ConfigMistakesAreRefusedAtTheOp) {
  const OpConfig crop = Op("center_crop", {{"size", int64_t{8}}});
  const OpConfig mask =
      Op("decode_image", {{"field", std::string("mask")},
                          {"interpolation", std::string("nearest")}});
  EXPECT_THAT(
      Pipeline::Create("p", {Op("decode_image"), Op("decode_jpeg"), crop}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("op[1] 'decode_jpeg': field 'image' is "
                         "already decoded by an earlier decode op")));
  EXPECT_THAT(
      Pipeline::Create("p", {Op("decode_image"), mask, crop,
                             Op("solarize", {{"field", std::string("mask")},
                                             {"threshold", 0.0}})}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("op[3] 'solarize': field 'mask' is decoded with "
                         "interpolation: nearest")));
  EXPECT_THAT(
      Pipeline::Create(
          "p", {Op("decode_image"), mask, crop,
                Op("random_erasing", {{"field", std::string("mask")}})}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("field 'mask' is decoded with interpolation")));
  EXPECT_THAT(Pipeline::Create("p", {Op("decode_image"), crop, mask}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op[2] 'decode_image': out of order: decode "
                                 "ops come first")));
}

}  // namespace
}  // namespace stoker::pipeline
