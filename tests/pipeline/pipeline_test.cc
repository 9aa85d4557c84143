#include "server/pipeline/pipeline.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"
#include "tests/testing/pipeline_runs.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::MakeJpeg;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

OpConfig Op(std::string name, OpArgs args = {}, int line = 0) {
  return {std::move(name), std::move(args), line};
}

// The usual ImageNet training pipeline, ending with `dtype` and `layout`.
std::vector<OpConfig> TrainOps(const std::string& dtype,
                               const std::string& layout) {
  std::vector<OpConfig> ops = {
      Op("decode_jpeg"),
      Op("random_resized_crop", {{"size", int64_t{64}}}),
      Op("random_flip"),
      Op("layout", {{"value", layout}}),
  };
  if (dtype != "uint8") {
    ops.insert(ops.end() - 1,
               Op("normalize", {{"mean", Floats{0.485, 0.456, 0.406}},
                                {"std", Floats{0.229, 0.224, 0.225}},
                                {"dtype", dtype}}));
  }
  return ops;
}

const std::vector<InputField> kSchema = {
    InputField::Image("image"),
    InputField::Dense("label", tensor::DType::kInt64)};

std::string Int64Bytes(int64_t v) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &v, 8);
  return bytes;
}

// Runs `bound` on one record and returns its outputs' bytes.
absl::StatusOr<std::vector<std::string>> RunOnce(const BoundPipeline& bound,
                                                 const std::string& jpeg,
                                                 int64_t label,
                                                 uint64_t sample_id,
                                                 StageTimes* times = nullptr) {
  SampleRng rng(1234, 3, sample_id);
  return ::stoker::testing::RunRecord(bound, jpeg, label, rng, times);
}

std::unique_ptr<BoundPipeline> MustBind(const std::vector<OpConfig>& ops) {
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("train", ops);
  EXPECT_THAT(pipeline, IsOk());
  absl::StatusOr<std::unique_ptr<BoundPipeline>> bound =
      (*pipeline)->Bind(kSchema);
  EXPECT_THAT(bound, IsOk());
  return *std::move(bound);
}

TEST(PipelineCreateTest, KeepsNameAndOpNames) {
  auto pipeline = Pipeline::Create("train", TrainOps("float32", "chw"));
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_EQ((*pipeline)->name(), "train");
  EXPECT_THAT((*pipeline)->op_names(),
              ElementsAre("decode_jpeg", "random_resized_crop", "random_flip",
                          "normalize", "layout"));
  EXPECT_EQ((*pipeline)->out_height(), 64);
  EXPECT_EQ((*pipeline)->format().dtype, tensor::DType::kFloat32);
  EXPECT_EQ((*pipeline)->format().layout, Layout::kChw);
}

TEST(PipelineCreateTest, TheDefinitionChangesWithAnyArgumentOrLimit) {
  auto definition = [](const std::vector<OpConfig>& ops, int64_t limit) {
    auto pipeline = Pipeline::Create("train", ops, limit);
    EXPECT_THAT(pipeline, IsOk());
    return (*pipeline)->definition();
  };
  const std::string base = definition(TrainOps("float32", "chw"), 1000000);
  EXPECT_EQ(definition(TrainOps("float32", "chw"), 1000000), base);
  EXPECT_THAT(base, HasSubstr("random_resized_crop{size=64}"));
  EXPECT_NE(definition(TrainOps("float16", "chw"), 1000000), base);
  EXPECT_NE(definition(TrainOps("float32", "chw"), 2000000), base);
  std::vector<OpConfig> smaller = TrainOps("float32", "chw");
  smaller[1].args["size"] = int64_t{32};
  EXPECT_NE(definition(smaller, 1000000), base);
}

TEST(PipelineRunTest, RefusesAnImageOverMaxDecodePixelsBeforeDecoding) {
  auto pipeline =
      Pipeline::Create("train", TrainOps("float32", "chw"), 200 * 100);
  ASSERT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind(kSchema);
  ASSERT_THAT(bound, IsOk());
  EXPECT_THAT(RunOnce(**bound, MakeJpeg(200, 100, 1), 1, 0), IsOk());
  EXPECT_THAT(RunOnce(**bound, MakeJpeg(201, 100, 1), 1, 0).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("image 201x100 (20100 pixels) is over "
                                 "limits.max_decode_pixels (20000)")));
}

TEST(PipelineCreateTest, RejectsUnknownOpNamingIndexAndLine) {
  EXPECT_THAT(
      Pipeline::Create("train", {Op("decode_jpeg"), Op("blur", {}, 12)}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("pipeline 'train': op[1] 'blur' (line 12)"),
                     HasSubstr("unknown op"), HasSubstr("center_crop"))));
}

TEST(PipelineCreateTest, RejectsBadArgumentsNamingTheOp) {
  EXPECT_THAT(
      Pipeline::Create("train",
                       {Op("decode_jpeg"), Op("random_flip", {{"p", 2.0}}, 7),
                        Op("center_crop", {{"size", int64_t{8}}})}),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr("op[1] 'random_flip' (line 7)"), HasSubstr("'p'"))));
  EXPECT_THAT(
      Pipeline::Create("train", {Op("decode_jpeg"), Op("center_crop", {})}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("missing required argument 'size'")));
}

TEST(PipelineCreateTest, RejectsOpsOutOfOrder) {
  const OpConfig crop = Op("center_crop", {{"size", int64_t{8}}});
  EXPECT_THAT(Pipeline::Create("p", {crop, Op("decode_jpeg")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("op[0] 'center_crop'"),
                             HasSubstr("first op must be decode_image"))));
  EXPECT_THAT(Pipeline::Create(
                  "p", {Op("decode_jpeg"), crop, Op("decode_jpeg", {}, 9)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("op[2] 'decode_jpeg' (line 9)"),
                             HasSubstr("out of order"))));
  EXPECT_THAT(Pipeline::Create("p", {Op("decode_jpeg"), crop, Op("normalize"),
                                     Op("random_flip")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("op[3] 'random_flip'"),
                             HasSubstr("before normalize and layout"))));
  EXPECT_THAT(
      Pipeline::Create("p", std::vector<OpConfig>{}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no ops")));
}

TEST(PipelineCreateTest, RejectsAnOutputSizeThatIsNotFixed) {
  const auto not_fixed = StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("output size is not fixed"));
  EXPECT_THAT(Pipeline::Create("p", {Op("decode_jpeg")}), not_fixed);
  EXPECT_THAT(Pipeline::Create("p", {Op("decode_jpeg"),
                                     Op("resize", {{"size", int64_t{256}}})}),
              not_fixed);
  EXPECT_THAT(
      Pipeline::Create(
          "p", {Op("decode_jpeg"), Op("center_crop", {{"size", int64_t{8}}}),
                Op("resize", {{"size", int64_t{256}}}), Op("random_flip")}),
      not_fixed);
  EXPECT_THAT(
      Pipeline::Create(
          "p", {Op("decode_jpeg"), Op("resize", {{"size", int64_t{256}}}),
                Op("center_crop", {{"size", int64_t{224}}})}),
      IsOk());
}

TEST(PipelineBindTest, ReportsImageThenInt64Outputs) {
  auto pipeline = Pipeline::Create("train", TrainOps("float16", "chw"));
  ASSERT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind(kSchema);
  ASSERT_THAT(bound, IsOk());
  const std::vector<tensor::TensorSpec>& outputs = (*bound)->outputs();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "image");
  EXPECT_EQ(outputs[0].dtype, tensor::DType::kFloat16);
  EXPECT_THAT(outputs[0].shape, ElementsAre(3, 64, 64));
  EXPECT_EQ(outputs[1].name, "label");
  EXPECT_EQ(outputs[1].dtype, tensor::DType::kInt64);
  EXPECT_TRUE(outputs[1].shape.empty());
}

TEST(PipelineBindTest, RequiresABytesFieldNamedImage) {
  auto pipeline = Pipeline::Create("train", TrainOps("uint8", "hwc"));
  ASSERT_THAT(pipeline, IsOk());
  const std::vector<InputField> no_image = {
      InputField::Image("jpeg"),
      InputField::Dense("label", tensor::DType::kInt64)};
  EXPECT_THAT((*pipeline)->Bind(no_image),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'image'"), HasSubstr("jpeg, label"))));
  const std::vector<InputField> int_image = {
      InputField::Dense("image", tensor::DType::kInt64)};
  EXPECT_THAT(
      (*pipeline)->Bind(int_image),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'image'")));
}

TEST(BoundPipelineTest, SameGeneratorGivesByteIdenticalOutputs) {
  const auto bound = MustBind(TrainOps("float32", "chw"));
  const std::string jpeg = MakeJpeg(320, 240, 5);
  auto a = RunOnce(*bound, jpeg, 7, 42);
  auto b = RunOnce(*bound, jpeg, 7, 42);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_TRUE(*a == *b);
  // Another sample id draws another crop.
  auto c = RunOnce(*bound, jpeg, 7, 43);
  ASSERT_THAT(c, IsOk());
  EXPECT_NE((*a)[0], (*c)[0]);
}

TEST(BoundPipelineTest, WritesTheLabel) {
  const auto bound = MustBind(TrainOps("uint8", "hwc"));
  auto out = RunOnce(*bound, MakeJpeg(100, 80, 1), -123456789012345, 0);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ((*out)[1], Int64Bytes(-123456789012345));
}

TEST(BoundPipelineTest, NormalizedOutputIsTheUint8OutputNormalized) {
  // The uint8 HWC path resizes straight into the destination; the float
  // CHW path converts afterwards. Same generator, same pixels.
  const auto bytes = MustBind(TrainOps("uint8", "hwc"));
  const auto floats = MustBind(TrainOps("float32", "chw"));
  const std::string jpeg = MakeJpeg(300, 200, 8);
  for (uint64_t id = 0; id < 8; ++id) {
    auto u8 = RunOnce(*bytes, jpeg, 0, id);
    auto f32 = RunOnce(*floats, jpeg, 0, id);
    ASSERT_THAT(u8, IsOk());
    ASSERT_THAT(f32, IsOk());
    const auto* pixels = reinterpret_cast<const uint8_t*>((*u8)[0].data());
    const auto* values = reinterpret_cast<const float*>((*f32)[0].data());
    const double mean[3] = {0.485, 0.456, 0.406};
    const double std[3] = {0.229, 0.224, 0.225};
    for (int y = 0; y < 64; ++y) {
      for (int x = 0; x < 64; ++x) {
        for (int c = 0; c < 3; ++c) {
          const uint8_t px = pixels[(y * 64 + x) * 3 + c];
          ASSERT_EQ(values[(c * 64 + y) * 64 + x],
                    static_cast<float>((px / 255.0 - mean[c]) / std[c]))
              << "sample " << id << " y=" << y << " x=" << x << " c=" << c;
        }
      }
    }
  }
}

TEST(BoundPipelineTest, UndecodableImagesAreDataLoss) {
  const auto bound = MustBind(TrainOps("float32", "chw"));
  EXPECT_THAT(RunOnce(*bound, ::stoker::testing::MakePngLookalike(), 0, 0),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("PNG")));
  const std::string jpeg = MakeJpeg(320, 240, 5);
  // Cut inside the first rows, which every crop window reads past.
  EXPECT_THAT(
      RunOnce(*bound, jpeg.substr(0, 700), 0, 0),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("undecodable JPEG")));
}

TEST(BoundPipelineTest, APngRendersItsCropUnderEitherDecodeName) {
  // 61x40 RGBA, centre crop 30x20: rows [10, 30), columns [16, 46) (as
  // torchvision rounds 15.5 to even), straight from the decoded window.
  const auto png = ::stoker::testing::MakePng(
      61, 40, ::stoker::testing::PngColor::kRgba, 8, false, 4);
  for (const char* decode : {"decode_image", "decode_jpeg"}) {
    const auto bound =
        MustBind({Op(decode), Op("center_crop", {{"size", Floats{20, 30}}}),
                  Op("normalize", {{"dtype", std::string("uint8")}})});
    auto out = RunOnce(*bound, png.bytes, 5, 0);
    ASSERT_THAT(out, IsOk()) << decode;
    std::string want;
    for (int y = 10; y < 30; ++y) {
      want.append(reinterpret_cast<const char*>(&png.rgb[(y * 61 + 16) * 3]),
                  30 * 3);
    }
    EXPECT_TRUE((*out)[0] == want) << decode;
  }
}

TEST(BoundPipelineTest, BytesOfNoKnownFormatAreDataLossSayingHowTheyStart) {
  const auto bound = MustBind(TrainOps("float32", "chw"));
  EXPECT_THAT(RunOnce(*bound, "GIF89a, not an image we decode", 0, 0),
              StatusIs(absl::StatusCode::kDataLoss,
                       "not JPEG, PNG, WebP or TIFF (starts 47 49 46 38)"));
}

TEST(BoundPipelineTest, RejectsWrongFieldAndBufferCounts) {
  const auto bound = MustBind(TrainOps("uint8", "hwc"));
  const std::string_view fields[] = {"x"};
  uint8_t* dst[] = {nullptr, nullptr};
  SampleRng rng(0, 0, 0);
  EXPECT_THAT(
      bound->Run(fields, rng, dst, nullptr),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 fields")));
}

TEST(BoundPipelineTest, Int64FieldOfWrongSizeIsDataLoss) {
  const auto bound = MustBind(TrainOps("uint8", "hwc"));
  const std::string jpeg = MakeJpeg(100, 80, 1);
  const std::string_view fields[] = {jpeg, "short"};
  std::vector<uint8_t> image(bound->outputs()[0].bytes());
  int64_t label = 0;
  uint8_t* dst[] = {image.data(), reinterpret_cast<uint8_t*>(&label)};
  SampleRng rng(0, 0, 0);
  EXPECT_THAT(bound->Run(fields, rng, dst, nullptr),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("'label' has 5 bytes, not 8")));
}

TEST(BoundPipelineTest, FillsStageTimes) {
  const auto bound = MustBind(TrainOps("float32", "chw"));
  StageTimes times;
  ASSERT_THAT(RunOnce(*bound, MakeJpeg(320, 240, 5), 0, 0, &times), IsOk());
  EXPECT_GT(times.decode_ns, 0);
  EXPECT_GT(times.augment_ns, 0);
  EXPECT_GT(times.collate_ns, 0);
}

TEST(BoundPipelineTest, FourThreadsGiveTheSingleThreadResults) {
  const auto bound = MustBind(TrainOps("float16", "chw"));
  std::vector<std::string> jpegs;
  for (uint32_t i = 0; i < 4; ++i) {
    jpegs.push_back(MakeJpeg(200 + 37 * i, 150 + 23 * i, i));
  }
  constexpr int kSamples = 32;
  std::vector<std::vector<std::string>> expected(kSamples);
  for (int id = 0; id < kSamples; ++id) {
    auto out = RunOnce(*bound, jpegs[id % 4], id, id);
    ASSERT_THAT(out, IsOk());
    expected[id] = *out;
  }
  std::vector<std::vector<std::vector<std::string>>> got(
      4, std::vector<std::vector<std::string>>(kSamples));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread runs every sample, in its own order.
      for (int k = 0; k < kSamples; ++k) {
        const int id = (k * 5 + t * 7) % kSamples;
        auto out = RunOnce(*bound, jpegs[id % 4], id, id);
        if (out.ok()) got[t][id] = *out;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) {
    for (int id = 0; id < kSamples; ++id) {
      ASSERT_TRUE(got[t][id] == expected[id])
          << "thread " << t << " sample " << id;
    }
  }
}

}  // namespace
}  // namespace stoker::pipeline
