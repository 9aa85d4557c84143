// Tests of the built-in ops: argument checks and the view each one plans.

#include <cmath>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/op.h"
#include "server/pipeline/registry.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

absl::StatusOr<AnyOp> MakeOp(const std::string& name, const OpArgs& given) {
  const OpDef* def = OpRegistry::Global().Find(name);
  if (def == nullptr) return absl::NotFoundError(name);
  absl::StatusOr<OpArgs> args = ResolveArgs(*def, given);
  if (!args.ok()) return args.status();
  return def->factory(*args);
}

// The op of interface T in `op`. REQUIRES: `op` holds one.
template <typename T>
T& As(AnyOp& op) {
  return *std::get<std::unique_ptr<T>>(op);
}

// Applies geometry op `name` with `args` to `view`.
View Planned(const std::string& name, const OpArgs& args, View view,
             SampleRng& rng) {
  absl::StatusOr<AnyOp> op = MakeOp(name, args);
  EXPECT_THAT(op, IsOk());
  EXPECT_THAT(As<GeometryOp>(*op).Apply(view, rng), IsOk());
  return view;
}

void ExpectInvalid(const std::string& name, const OpArgs& args,
                   const std::string& arg) {
  EXPECT_THAT(MakeOp(name, args), StatusIs(absl::StatusCode::kInvalidArgument,
                                           AllOf(HasSubstr("'" + name + "'"),
                                                 HasSubstr("'" + arg + "'"))))
      << name << " with bad " << arg;
}

TEST(OpArgsTest, EveryOpRejectsBadValuesByName) {
  ExpectInvalid("random_flip", {{"p", 1.5}}, "p");
  ExpectInvalid("random_flip", {{"p", -0.1}}, "p");
  ExpectInvalid("random_resized_crop", {{"size", int64_t{0}}}, "size");
  ExpectInvalid("random_resized_crop", {{"size", Floats{224, 1e6}}}, "size");
  ExpectInvalid("random_resized_crop",
                {{"size", int64_t{224}}, {"scale", Floats{0.5, 0.1}}}, "scale");
  ExpectInvalid("random_resized_crop",
                {{"size", int64_t{224}}, {"scale", Floats{0.5, 1.5}}}, "scale");
  ExpectInvalid("random_resized_crop",
                {{"size", int64_t{224}}, {"ratio", Floats{0.0, 1.0}}}, "ratio");
  ExpectInvalid("random_resized_crop",
                {{"size", int64_t{224}}, {"ratio", Floats{1.0}}}, "ratio");
  ExpectInvalid("random_resized_crop", {}, "size");
  ExpectInvalid("resize", {{"size", int64_t{-1}}}, "size");
  ExpectInvalid("resize", {{"size", Floats{1, 2, 3}}}, "size");
  ExpectInvalid(
      "resize",
      {{"size", int64_t{8}}, {"interpolation", std::string("lanczos")}},
      "interpolation");
  ExpectInvalid(
      "random_resized_crop",
      {{"size", int64_t{8}}, {"interpolation", std::string("nearest")}},
      "interpolation");
  ExpectInvalid("center_crop", {{"size", Floats{0, 5}}}, "size");
  ExpectInvalid("center_crop", {{"size", std::string("big")}}, "size");
  ExpectInvalid("normalize", {{"dtype", std::string("int8")}}, "dtype");
  ExpectInvalid("normalize", {{"mean", Floats{0.5, 0.5, 0.5}}}, "mean");
  ExpectInvalid("normalize",
                {{"mean", Floats{0.5, 0.5}}, {"std", Floats{1, 1}}}, "mean");
  ExpectInvalid("layout", {{"value", std::string("nhwc")}}, "layout");
  ExpectInvalid("decode_jpeg", {{"fast", true}}, "fast");
}

TEST(OpArgsTest, EveryPixelOpRejectsBadValuesByName) {
  ExpectInvalid("color_jitter", {{"brightness", -0.1}}, "brightness");
  ExpectInvalid("color_jitter", {{"contrast", Floats{1.5, 0.5}}}, "contrast");
  ExpectInvalid("color_jitter", {{"saturation", Floats{0.5, 1, 2}}},
                "saturation");
  ExpectInvalid("color_jitter", {{"hue", 0.6}}, "hue");
  ExpectInvalid("color_jitter", {{"hue", -0.1}}, "hue");
  ExpectInvalid("color_jitter", {{"hue", Floats{-0.6, 0.1}}}, "hue");
  ExpectInvalid("color_jitter", {{"p", 1.5}}, "p");
  ExpectInvalid("random_grayscale", {{"p", -1.0}}, "p");
  ExpectInvalid("solarize", {}, "threshold");
  ExpectInvalid("solarize", {{"threshold", 300.0}}, "threshold");
  ExpectInvalid("posterize", {{"bits", int64_t{9}}}, "bits");
  ExpectInvalid("posterize", {{"bits", 2.5}}, "bits");
  ExpectInvalid("equalize", {{"p", 2.0}}, "p");
  ExpectInvalid("autocontrast", {{"p", std::string("x")}}, "p");
  ExpectInvalid("adjust_sharpness", {{"sharpness_factor", -1.0}},
                "sharpness_factor");
  ExpectInvalid("gaussian_blur", {{"kernel_size", int64_t{4}}}, "kernel_size");
  ExpectInvalid("gaussian_blur", {}, "kernel_size");
  ExpectInvalid("gaussian_blur",
                {{"kernel_size", int64_t{5}}, {"sigma", Floats{2, 1}}},
                "sigma");
  ExpectInvalid("gaussian_blur", {{"kernel_size", int64_t{5}}, {"sigma", 0.0}},
                "sigma");
  EXPECT_THAT(
      MakeOp("color_jitter", {{"brightness", 0.4}, {"hue", Floats{-0.5, 0.5}}}),
      IsOk());
  EXPECT_THAT(
      MakeOp("gaussian_blur", {{"kernel_size", Floats{3, 9}}, {"sigma", 1.5}}),
      IsOk());
}

TEST(OpArgsTest, NormalizeRejectsNonPositiveStdAndMeanOnUint8) {
  EXPECT_THAT(MakeOp("normalize",
                     {{"mean", Floats{0, 0, 0}}, {"std", Floats{1, 0, 1}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 'std' expects values > 0, got 0 "
                                 "at [1]")));
  EXPECT_THAT(MakeOp("normalize", {{"mean", Floats{0.5, 0.5, 0.5}},
                                   {"std", Floats{1, 1, 1}},
                                   {"dtype", std::string("uint8")}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("uint8 passes pixels through")));
  EXPECT_THAT(MakeOp("normalize", {{"dtype", std::string("uint8")}}), IsOk());
  EXPECT_THAT(MakeOp("normalize", {}), IsOk());
}

TEST(OpArgsTest, OpsDeclareTheirKinds) {
  const auto kind = [](const std::string& name) {
    const OpDef* def = OpRegistry::Global().Find(name);
    EXPECT_NE(def, nullptr) << name;
    return def == nullptr ? OpKind::kBatch : def->kind;
  };
  EXPECT_EQ(kind("decode_jpeg"), OpKind::kDecode);
  for (const char* name :
       {"center_crop", "random_flip", "random_resized_crop", "resize"}) {
    EXPECT_EQ(kind(name), OpKind::kGeometry) << name;
  }
  EXPECT_EQ(kind("normalize"), OpKind::kFormat);
  EXPECT_EQ(kind("layout"), OpKind::kFormat);
}

TEST(OpArgsTest, OpsBuildAnOpOfTheirKind) {
  EXPECT_EQ(KindOf(*MakeOp("decode_jpeg", {})), OpKind::kDecode);
  EXPECT_EQ(KindOf(*MakeOp("decode_image", {})), OpKind::kDecode);
  EXPECT_EQ(KindOf(*MakeOp("random_flip", {})), OpKind::kGeometry);
  EXPECT_EQ(KindOf(*MakeOp("normalize", {})), OpKind::kFormat);
  EXPECT_EQ(KindOf(*MakeOp("layout", {{"value", std::string("chw")}})),
            OpKind::kFormat);
}

TEST(DecodeImageOpTest, NamesTheImageFieldTheOldNameTakesNoArguments) {
  for (const char* name : {"decode_image", "decode_jpeg"}) {
    absl::StatusOr<AnyOp> op = MakeOp(name, {});
    ASSERT_THAT(op, IsOk()) << name;
    EXPECT_EQ(std::get<DecodeSpec>(*op).field, "image") << name;
  }
  absl::StatusOr<AnyOp> op =
      MakeOp("decode_image", {{"field", std::string("photo")}});
  ASSERT_THAT(op, IsOk());
  EXPECT_EQ(std::get<DecodeSpec>(*op).field, "photo");
  ExpectInvalid("decode_jpeg", {{"field", std::string("photo")}}, "field");
}

// resize and random_resized_crop set the view's interpolation: bilinear
// unless asked; a later op that does not resample (center_crop) keeps it.
TEST(ResizeOpTest, InterpolationReachesTheView) {
  SampleRng rng(0, 0, 0);
  const OpArgs bicubic = {{"size", int64_t{32}},
                          {"interpolation", std::string("bicubic")}};
  EXPECT_EQ(Planned("resize", {{"size", int64_t{32}}}, FullView(64, 48), rng)
                .interpolation,
            Interpolation::kBilinear);
  View view = Planned("resize", bicubic, FullView(64, 48), rng);
  EXPECT_EQ(view.interpolation, Interpolation::kBicubic);
  view = Planned("center_crop", {{"size", int64_t{24}}}, view, rng);
  EXPECT_EQ(view.interpolation, Interpolation::kBicubic);
  EXPECT_EQ(Planned("random_resized_crop", bicubic, FullView(64, 48), rng)
                .interpolation,
            Interpolation::kBicubic);
  EXPECT_EQ(Planned("random_resized_crop", {{"size", int64_t{32}}},
                    Planned("resize", bicubic, FullView(64, 48), rng), rng)
                .interpolation,
            Interpolation::kBilinear);
}

TEST(ResizeOpTest, ShorterSideFollowsTorchvision) {
  SampleRng rng(0, 0, 0);
  // int(256 * 500 / 375) = 341.
  View wide =
      Planned("resize", {{"size", int64_t{256}}}, FullView(500, 375), rng);
  EXPECT_EQ(wide.out_width, 341);
  EXPECT_EQ(wide.out_height, 256);
  View tall =
      Planned("resize", {{"size", int64_t{256}}}, FullView(375, 500), rng);
  EXPECT_EQ(tall.out_width, 256);
  EXPECT_EQ(tall.out_height, 341);
  // The source rectangle is untouched.
  EXPECT_EQ(tall.width, 375);
  EXPECT_EQ(tall.height, 500);
}

TEST(ResizeOpTest, PairSetsHeightThenWidth) {
  SampleRng rng(0, 0, 0);
  View view =
      Planned("resize", {{"size", Floats{100, 50}}}, FullView(640, 480), rng);
  EXPECT_EQ(view.out_height, 100);
  EXPECT_EQ(view.out_width, 50);
  absl::StatusOr<AnyOp> pair = MakeOp("resize", {{"size", Floats{100, 50}}});
  absl::StatusOr<AnyOp> side = MakeOp("resize", {{"size", int64_t{100}}});
  ASSERT_THAT(pair, IsOk());
  ASSERT_THAT(side, IsOk());
  EXPECT_EQ(As<GeometryOp>(*pair).size_effect().kind, SizeEffect::kFixes);
  EXPECT_EQ(As<GeometryOp>(*side).size_effect().kind, SizeEffect::kVaries);
}

TEST(CenterCropOpTest, RoundsOffsetsLikeTorchvision) {
  SampleRng rng(0, 0, 0);
  // round(1.5) = 2 and round(2.5) = 2: Python rounds half to even.
  View odd =
      Planned("center_crop", {{"size", int64_t{4}}}, FullView(7, 7), rng);
  EXPECT_EQ(odd.x, 2);
  EXPECT_EQ(odd.y, 2);
  View even =
      Planned("center_crop", {{"size", Floats{3, 3}}}, FullView(8, 8), rng);
  EXPECT_EQ(even.x, 2);
  EXPECT_EQ(even.width, 3);
  EXPECT_EQ(even.out_width, 3);
}

TEST(CenterCropOpTest, CropLargerThanImageReachesOutsideLikePadding) {
  SampleRng rng(0, 0, 0);
  // torchvision pads (8 - 5) // 2 = 1 column on the left.
  View view =
      Planned("center_crop", {{"size", Floats{4, 8}}}, FullView(5, 6), rng);
  EXPECT_EQ(view.x, -1);
  EXPECT_EQ(view.width, 8);
  EXPECT_EQ(view.y, 1);
  EXPECT_EQ(view.height, 4);
}

TEST(CenterCropOpTest, AfterResizeMapsBackToSourcePixels) {
  SampleRng rng(0, 0, 0);
  View view =
      Planned("resize", {{"size", int64_t{256}}}, FullView(400, 300), rng);
  ASSERT_EQ(view.out_width, 341);
  view = Planned("center_crop", {{"size", int64_t{224}}}, view, rng);
  // Crop at (16, round(58.5) = 58) of the 341 x 256 resized image.
  EXPECT_DOUBLE_EQ(view.x, 58 * 400.0 / 341);
  EXPECT_DOUBLE_EQ(view.width, 224 * 400.0 / 341);
  EXPECT_DOUBLE_EQ(view.y, 16 * 300.0 / 256);
  EXPECT_DOUBLE_EQ(view.height, 224 * 300.0 / 256);
  EXPECT_EQ(view.out_width, 224);
  EXPECT_EQ(view.out_height, 224);
}

TEST(RandomFlipOpTest, TogglesTheFlagWithItsProbability) {
  SampleRng rng(0, 0, 0);
  View view = Planned("random_flip", {{"p", 1.0}}, FullView(10, 10), rng);
  EXPECT_TRUE(view.flip);
  view = Planned("random_flip", {{"p", 1.0}}, view, rng);
  EXPECT_FALSE(view.flip);
  view = Planned("random_flip", {{"p", 0.0}}, view, rng);
  EXPECT_FALSE(view.flip);
  int flips = 0;
  for (uint64_t id = 0; id < 1000; ++id) {
    SampleRng sample_rng(1, 0, id);
    flips += Planned("random_flip", {}, FullView(10, 10), sample_rng).flip;
  }
  EXPECT_NEAR(flips, 500, 60);
}

TEST(CropViewTest, CropOfFlippedViewTakesTheMirroredSource) {
  View view = FullView(100, 50);
  view.flip = true;
  // Columns [10, 30) of the mirrored image are source columns [70, 90).
  CropView(5, 10, 20, 20, &view);
  EXPECT_EQ(view.x, 70);
  EXPECT_EQ(view.y, 5);
  EXPECT_TRUE(view.flip);
}

TEST(RandomResizedCropOpTest, StaysInsideTheViewWithinScaleAndRatio) {
  auto op = MakeOp("random_resized_crop", {{"size", Floats{32, 48}}});
  ASSERT_THAT(op, IsOk());
  for (uint64_t id = 0; id < 2000; ++id) {
    SampleRng rng(11, 0, id);
    View v = FullView(id % 2 ? 640 : 333, id % 3 ? 480 : 517);
    v.flip = id % 5 == 0;
    const View before = v;
    ASSERT_THAT(As<GeometryOp>(*op).Apply(v, rng), IsOk());
    ASSERT_GE(v.x, 0);
    ASSERT_GE(v.y, 0);
    ASSERT_LE(v.x + v.width, before.width);
    ASSERT_LE(v.y + v.height, before.height);
    ASSERT_EQ(v.out_height, 32);
    ASSERT_EQ(v.out_width, 48);
    ASSERT_EQ(v.flip, before.flip);
    // Rounding w and h to whole pixels can move the area and the ratio a
    // little past the sampled range.
    const double fraction = v.width * v.height / (before.width * before.height);
    EXPECT_GE(fraction, 0.08 * 0.95);
    EXPECT_LE(fraction, 1.0);
    const double ratio = v.width / v.height;
    EXPECT_GE(ratio, 0.75 * 0.95);
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.05);
  }
}

TEST(RandomResizedCropOpTest, FallsBackToTorchvisionCentreCrop) {
  SampleRng rng(0, 0, 0);
  // No crop of 90-100% of a 100 x 10 view has a ratio in [3/4, 4/3], so
  // all ten attempts fail. Too wide: h = 10, w = round(10 * 4 / 3) = 13,
  // j = (100 - 13) // 2 = 43.
  View wide = Planned("random_resized_crop",
                      {{"size", int64_t{8}}, {"scale", Floats{0.9, 1.0}}},
                      FullView(100, 10), rng);
  EXPECT_EQ(wide.x, 43);
  EXPECT_EQ(wide.width, 13);
  EXPECT_EQ(wide.y, 0);
  EXPECT_EQ(wide.height, 10);
  // Too tall: w = 10, h = round(10 / 0.75) = 13, i = 43.
  View tall = Planned("random_resized_crop",
                      {{"size", int64_t{8}}, {"scale", Floats{0.9, 1.0}}},
                      FullView(10, 100), rng);
  EXPECT_EQ(tall.y, 43);
  EXPECT_EQ(tall.height, 13);
  EXPECT_EQ(tall.width, 10);
  // The ratio range lies above 30 / 20: w = 30, h = round(30 / 2) = 15.
  View narrow = Planned("random_resized_crop",
                        {{"size", int64_t{8}},
                         {"scale", Floats{1.0, 1.0}},
                         {"ratio", Floats{2.0, 2.0}}},
                        FullView(30, 20), rng);
  EXPECT_EQ(narrow.x, 0);
  EXPECT_EQ(narrow.width, 30);
  EXPECT_EQ(narrow.y, 2);
  EXPECT_EQ(narrow.height, 15);
}

TEST(RandomResizedCropOpTest, SameGeneratorGivesSameCrop) {
  auto op = MakeOp("random_resized_crop", {{"size", int64_t{224}}});
  ASSERT_THAT(op, IsOk());
  View a = FullView(640, 480), b = FullView(640, 480);
  SampleRng rng_a(5, 6, 7), rng_b(5, 6, 7);
  ASSERT_THAT(As<GeometryOp>(*op).Apply(a, rng_a), IsOk());
  ASSERT_THAT(As<GeometryOp>(*op).Apply(b, rng_b), IsOk());
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
}

TEST(FormatOpsTest, NormalizeAndLayoutSetTheOutputFormat) {
  OutputFormat format;
  absl::StatusOr<AnyOp> normalize =
      MakeOp("normalize", {{"mean", Floats{0.5, 0.4, 0.3}},
                           {"std", Floats{0.2, 0.25, 0.5}},
                           {"dtype", std::string("float16")}});
  ASSERT_THAT(normalize, IsOk());
  As<FormatOp>(*normalize).Apply(format);
  absl::StatusOr<AnyOp> layout =
      MakeOp("layout", {{"value", std::string("chw")}});
  ASSERT_THAT(layout, IsOk());
  As<FormatOp>(*layout).Apply(format);
  EXPECT_EQ(format.dtype, tensor::DType::kFloat16);
  EXPECT_EQ(format.layout, Layout::kChw);
  EXPECT_EQ(format.mean[1], 0.4);
  EXPECT_EQ(format.std[2], 0.5);
}

}  // namespace
}  // namespace stoker::pipeline
