// Tests of how BoundPipeline runs the kinds of op (op.h): pixel ops on the
// rendered image wherever it lives, the lazy flip before an op that does
// not commute with it, tensor ops on the written output, the order of
// kinds, and the fields ops bind to. The ops here are test ops, registered
// in this binary only, so that each checks one property of the runner.

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
using ::stoker::testing::MakeJpeg;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

// Paints column 0 of the image red: positional, so it does not commute with
// a flip. `flip_invariant` claims otherwise, to show what the claim means.
class MarkLeftColumnOp final : public PixelOp {
 public:
  explicit MarkLeftColumnOp(bool claims_invariant)
      : claims_invariant_(claims_invariant) {}
  bool flip_invariant() const override { return claims_invariant_; }
  absl::Status Apply(const PixelTargets& targets, SampleRng&) const override {
    const ImageBuffer& image = targets.main();
    for (int y = 0; y < image.height; ++y) {
      uint8_t* px = image.row(y);
      px[0] = 255;
      px[1] = 0;
      px[2] = 0;
    }
    return absl::OkStatus();
  }

 private:
  const bool claims_invariant_;
};

// Inverts every byte: a colour op that commutes with a flip.
class InvertOp final : public PixelOp {
 public:
  absl::Status Apply(const PixelTargets& targets, SampleRng&) const override {
    const ImageBuffer& image = targets.main();
    for (int y = 0; y < image.height; ++y) {
      uint8_t* row = image.row(y);
      for (int i = 0; i < image.width * image.channels; ++i) {
        row[i] = 255 - row[i];
      }
    }
    return absl::OkStatus();
  }
};

// Writes 42 at channel 1, row 2, column 3 of the output, through the
// TensorRef's dtype and layout. Refuses float16 outputs in Check.
class ProbeTensorOp final : public TensorOp {
 public:
  absl::Status Check(const OutputFormat& format) const override {
    if (format.dtype == tensor::DType::kFloat16) {
      return absl::InvalidArgumentError("test_probe takes no float16");
    }
    return absl::OkStatus();
  }
  absl::Status Apply(const TensorRef& out, SampleRng&) const override {
    const size_t index =
        out.layout == Layout::kChw
            ? (1 * static_cast<size_t>(out.height) + 2) * out.width + 3
            : (2 * static_cast<size_t>(out.width) + 3) * out.channels + 1;
    if (out.dtype == tensor::DType::kFloat32) {
      reinterpret_cast<float*>(out.data)[index] = 42.0f;
    } else {
      out.data[index] = 42;
    }
    return absl::OkStatus();
  }
};

template <typename Kind, typename Op, typename... Args>
OpDef TestDef(std::string name, OpKind kind, Args... args) {
  OpDef def;
  def.name = name;
  def.kind = kind;
  def.binds_field = true;
  def.doc = "A test op.";
  def.example = name;
  def.factory = [args...](const OpArgs&) -> absl::StatusOr<AnyOp> {
    return AnyOp(std::unique_ptr<Kind>(std::make_unique<Op>(args...)));
  };
  return def;
}

OpDef MarkLeftDef() {
  return TestDef<PixelOp, MarkLeftColumnOp>("test_mark_left", OpKind::kPixel,
                                            false);
}
OpDef MarkLeftClaimingInvariantDef() {
  return TestDef<PixelOp, MarkLeftColumnOp>("test_mark_left_invariant",
                                            OpKind::kPixel, true);
}
OpDef InvertDef() {
  return TestDef<PixelOp, InvertOp>("test_invert", OpKind::kPixel);
}
OpDef ProbeDef() {
  return TestDef<TensorOp, ProbeTensorOp>("test_probe", OpKind::kTensor);
}
// Registered as a geometry op, but its factory builds a pixel op.
OpDef MislabelledDef() {
  return TestDef<PixelOp, InvertOp>("test_mislabelled", OpKind::kGeometry);
}

STOKER_REGISTER_OP(MarkLeftDef);
STOKER_REGISTER_OP(MarkLeftClaimingInvariantDef);
STOKER_REGISTER_OP(InvertDef);
STOKER_REGISTER_OP(ProbeDef);
STOKER_REGISTER_OP(MislabelledDef);

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

OpConfig Normalize(const std::string& dtype) {
  if (dtype == "uint8") return Op("normalize", {{"dtype", dtype}});
  return Op("normalize", {{"mean", Floats{0.5, 0.4, 0.3}},
                          {"std", Floats{0.2, 0.25, 0.3}},
                          {"dtype", dtype}});
}

const std::vector<InputField> kSchema = {
    InputField::Image("image"),
    InputField::Dense("label", tensor::DType::kInt64)};

// Creates, binds and runs `ops` on `jpeg`; the image output's bytes.
absl::StatusOr<std::string> RunImage(const std::vector<OpConfig>& ops,
                                     const std::string& jpeg,
                                     uint64_t sample_id = 0) {
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("p", ops);
  if (!pipeline.ok()) return pipeline.status();
  absl::StatusOr<std::unique_ptr<BoundPipeline>> bound =
      (*pipeline)->Bind(kSchema);
  if (!bound.ok()) return bound.status();
  std::string image((*bound)->outputs()[0].bytes(), '\0');
  std::string label(8, '\0');
  uint8_t* dst[] = {reinterpret_cast<uint8_t*>(image.data()),
                    reinterpret_cast<uint8_t*>(label.data())};
  const std::string_view fields[] = {jpeg, label};
  SampleRng rng(7, 0, sample_id);
  if (absl::Status s = (*bound)->Run(fields, rng, dst, nullptr); !s.ok()) {
    return s;
  }
  return image;
}

// `ops`, then `tail` (format ops), as one list.
std::vector<OpConfig> Then(std::vector<OpConfig> ops,
                           const std::vector<OpConfig>& tail) {
  ops.insert(ops.end(), tail.begin(), tail.end());
  return ops;
}

// The pixel (y, x, c) of an HWC uint8 image `width` wide.
uint8_t Pixel(const std::string& image, int width, int y, int x, int c) {
  return static_cast<uint8_t>(
      image[(static_cast<size_t>(y) * width + x) * 3 + c]);
}

TEST(PixelOpTest, WorksOnTheRenderedImageWhereverItLives) {
  // Each geometry renders through another row of the copy table
  // (docs/pipeline-design.md §2.2): resampled, decoded at the output size
  // (the window is the image), and padded around the image.
  const std::string jpeg = MakeJpeg(40, 30, 3);
  const std::vector<std::vector<OpConfig>> geometries = {
      {Op("decode_image"), Op("resize", {{"size", Floats{24, 20}}}),
       Op("random_flip", {{"p", 1.0}})},
      {Op("decode_image"), Op("center_crop", {{"size", Floats{30, 40}}})},
      {Op("decode_image"), Op("random_flip", {{"p", 1.0}}),
       Op("center_crop", {{"size", Floats{36, 50}}})},
  };
  for (size_t g = 0; g < geometries.size(); ++g) {
    const std::vector<OpConfig>& geometry = geometries[g];
    const auto plain = RunImage(Then(geometry, {Normalize("uint8")}), jpeg);
    const auto inverted_u8 =
        RunImage(Then(geometry, {Op("test_invert"), Normalize("uint8")}), jpeg);
    const auto inverted_f32 = RunImage(
        Then(geometry, {Op("test_invert"), Normalize("float32"),
                        Op("layout", {{"value", std::string("chw")}})}),
        jpeg);
    ASSERT_THAT(plain, IsOk()) << g;
    ASSERT_THAT(inverted_u8, IsOk()) << g;
    ASSERT_THAT(inverted_f32, IsOk()) << g;
    const size_t n = plain->size();
    const size_t plane = n / 3;
    const auto* floats = reinterpret_cast<const float*>(inverted_f32->data());
    const double mean[3] = {0.5, 0.4, 0.3}, std[3] = {0.2, 0.25, 0.3};
    for (size_t i = 0; i < n; ++i) {
      const uint8_t want = 255 - static_cast<uint8_t>((*plain)[i]);
      ASSERT_EQ(static_cast<uint8_t>((*inverted_u8)[i]), want)
          << "geometry " << g << " byte " << i;
      const size_t c = i % 3, pixel = i / 3;
      ASSERT_EQ(floats[c * plane + pixel],
                static_cast<float>((want / 255.0 - mean[c]) / std[c]))
          << "geometry " << g << " byte " << i;
    }
  }
}

TEST(PixelOpTest, APositionalOpSeesTheImageAfterTheFlip) {
  const std::string jpeg = MakeJpeg(40, 30, 5);
  const std::vector<OpConfig> flipped = {
      Op("decode_image"), Op("center_crop", {{"size", int64_t{16}}}),
      Op("random_flip", {{"p", 1.0}})};
  // As torchvision: flip, then the op paints the left column of what it
  // sees, which is what the output shows; whether the op works in the
  // batch buffer (uint8 HWC) or in a temporary (float).
  const auto u8 =
      RunImage(Then(flipped, {Op("test_mark_left"), Normalize("uint8")}), jpeg);
  const auto f32 = RunImage(
      Then(flipped, {Op("test_mark_left"), Normalize("float32")}), jpeg);
  ASSERT_THAT(u8, IsOk());
  ASSERT_THAT(f32, IsOk());
  const auto* floats = reinterpret_cast<const float*>(f32->data());
  for (int y = 0; y < 16; ++y) {
    EXPECT_EQ(Pixel(*u8, 16, y, 0, 0), 255) << y;
    EXPECT_EQ(Pixel(*u8, 16, y, 0, 1), 0) << y;
    EXPECT_EQ(floats[y * 16 * 3], static_cast<float>((1.0 - 0.5) / 0.2)) << y;
    EXPECT_EQ(floats[y * 16 * 3 + 1], static_cast<float>(-0.4 / 0.25)) << y;
  }
  // An op that (wrongly) claims to commute with the flip runs before it:
  // the mark ends up on the right.
  const auto claimed = RunImage(
      Then(flipped, {Op("test_mark_left_invariant"), Normalize("uint8")}),
      jpeg);
  ASSERT_THAT(claimed, IsOk());
  const auto unmarked = RunImage(Then(flipped, {Normalize("uint8")}), jpeg);
  ASSERT_THAT(unmarked, IsOk());
  for (int y = 0; y < 16; ++y) {
    EXPECT_EQ(Pixel(*claimed, 16, y, 15, 0), 255) << y;
    EXPECT_EQ(Pixel(*claimed, 16, y, 0, 0), Pixel(*unmarked, 16, y, 0, 0)) << y;
  }
}

TEST(TensorOpTest, WorksOnTheWrittenOutputInItsDtypeAndLayout) {
  const std::string jpeg = MakeJpeg(40, 30, 7);
  const std::vector<OpConfig> geometry = {
      Op("decode_image"), Op("center_crop", {{"size", int64_t{8}}})};
  const auto f32 =
      RunImage(Then(geometry, {Normalize("float32"),
                               Op("layout", {{"value", std::string("chw")}}),
                               Op("test_probe")}),
               jpeg);
  ASSERT_THAT(f32, IsOk());
  EXPECT_EQ(reinterpret_cast<const float*>(f32->data())[(1 * 8 + 2) * 8 + 3],
            42.0f);
  const auto u8 =
      RunImage(Then(geometry, {Normalize("uint8"), Op("test_probe")}), jpeg);
  ASSERT_THAT(u8, IsOk());
  EXPECT_EQ(Pixel(*u8, 8, 2, 3, 1), 42);
  EXPECT_THAT(Pipeline::Create("p", Then(geometry, {Normalize("float16"),
                                                    Op("test_probe")})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("op[3] 'test_probe'"),
                             HasSubstr("takes no float16"))));
}

TEST(PipelineKindsTest, RefusesKindsOutOfOrderSayingWhy) {
  const OpConfig crop = Op("center_crop", {{"size", int64_t{8}}});
  EXPECT_THAT(
      Pipeline::Create("p", {Op("decode_image"), Op("test_invert"), crop}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("op[2] 'center_crop'"),
                     HasSubstr("geometry ops must come before pixel "
                               "ops, which work on the image "
                               "rendered from the final geometry"))));
  EXPECT_THAT(Pipeline::Create("p", {Op("decode_image"), crop,
                                     Normalize("uint8"), Op("test_invert")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pixel ops must come before normalize and "
                                 "layout")));
  EXPECT_THAT(Pipeline::Create("p", {Op("decode_image"), crop, Op("test_probe"),
                                     Normalize("uint8")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("normalize and layout must come before "
                                 "tensor ops, which work on the written "
                                 "output")));
  EXPECT_THAT(
      Pipeline::Create("p", {Op("decode_image"), Op("test_mislabelled"), crop}),
      StatusIs(absl::StatusCode::kInternal,
               HasSubstr("registered as a geometry op, but its factory built "
                         "a pixel op")));
}

TEST(PipelineKindsTest, OpsBindTheFieldTheyName) {
  const OpConfig crop = Op("center_crop", {{"size", int64_t{8}}});
  EXPECT_THAT(
      Pipeline::Create("p",
                       {Op("decode_image"), crop,
                        Op("test_invert", {{"field", std::string("mask")}})}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("op[2] 'test_invert'"),
                     HasSubstr("field 'mask' is not decoded by any decode "
                               "op"))));
  // decode_image names the record field, and the output is named after it.
  auto pipeline = Pipeline::Create(
      "p", {Op("decode_image", {{"field", std::string("photo")}}), crop,
            Op("test_invert", {{"field", std::string("photo")}})});
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_THAT((*pipeline)->Bind(kSchema),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs an image field named 'photo'; the "
                                 "dataset has: image, label")));
  const std::vector<InputField> photos = {
      InputField::Dense("label", tensor::DType::kInt64),
      InputField::Image("photo")};
  auto bound = (*pipeline)->Bind(photos);
  ASSERT_THAT(bound, IsOk());
  EXPECT_EQ((*bound)->outputs()[0].name, "photo");
  EXPECT_EQ((*bound)->outputs()[1].name, "label");
}

TEST(PipelineRunTest, BytesOfNoKnownFormatAreDataLossSayingHowTheyStart) {
  EXPECT_THAT(
      RunImage({Op("decode_image"), Op("center_crop", {{"size", int64_t{8}}})},
               "GIF89a..."),
      StatusIs(absl::StatusCode::kDataLoss,
               "not JPEG, PNG, WebP or TIFF (starts 47 49 46 38)"));
}

}  // namespace
}  // namespace stoker::pipeline
