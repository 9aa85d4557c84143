// Tests of the batch ops mixup, cutmix and mixup_cutmix: the mixing
// kernels against formulas written out here, CutMix's pasted box against
// its label weight, the soft labels a bound pipeline writes, and where
// Create and Bind refuse them. tests/python/test_batch_ops.py holds the
// parity with torchvision's reference RandomMixup / RandomCutmix through a
// daemon, and the batches after a resume.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/kernels/mix.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/registry.h"
#include "server/tensor/float16.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

constexpr int kW = 12, kH = 10, kClasses = 7;

// The op `name` built from the registry with `args`.
std::unique_ptr<BatchOp> MakeBatchOp(const std::string& name, OpArgs args) {
  const OpDef* def = OpRegistry::Global().Find(name);
  EXPECT_NE(def, nullptr) << name;
  absl::StatusOr<OpArgs> resolved = ResolveArgs(*def, args);
  EXPECT_THAT(resolved, IsOk());
  absl::StatusOr<AnyOp> op = def->factory(*resolved);
  EXPECT_THAT(op, IsOk());
  return std::move(std::get<std::unique_ptr<BatchOp>>(*op));
}

// A batch of `n` float32 [3, kH, kW] images of noise and one-hot labels
// (sample i has class i % kClasses).
struct TestBatch {
  std::vector<float> images;
  std::vector<float> soft;
  BatchImages view;
};
void MakeBatch(TestBatch& b, uint32_t n, tensor::DType dtype, Layout layout,
               uint32_t seed) {
  const size_t count = size_t{3} * kH * kW;
  b.images.assign(n * count, 0.0f);
  SampleRng rng(seed, 0, 0);
  for (float& v : b.images) v = static_cast<float>(rng.Uniform(-2, 2));
  if (dtype == tensor::DType::kUint8) {
    // Sample i is i + 1 everywhere, so a pixel tells whose it is.
    auto* bytes = reinterpret_cast<uint8_t*>(b.images.data());
    for (uint32_t i = 0; i < n; ++i) {
      std::memset(bytes + i * count, static_cast<int>(i + 1), count);
    }
  }
  b.soft.assign(size_t{n} * kClasses, 0.0f);
  for (uint32_t i = 0; i < n; ++i) b.soft[i * kClasses + i % kClasses] = 1.0f;
  b.view.image = {reinterpret_cast<uint8_t*>(b.images.data()), dtype, layout,
                  kH, kW, 3};
  b.view.size = n;
  b.view.soft = b.soft.data();
  b.view.num_classes = kClasses;
}

TEST(MixKernelsTest, MixUpWithAFixedLambdaIsTheRolledBlend) {
  for (const uint32_t n : {1u, 2u, 5u}) {
    TestBatch b;
    MakeBatch(b, n, tensor::DType::kFloat32, Layout::kChw, n);
    const std::vector<float> x = b.images;
    const double lambda = 0.3137;
    kernels::MixUpImages(b.view, lambda);
    // torchvision: rolled = x.roll(1, 0); rolled.mul_(1 - lam);
    // x.mul_(lam).add_(rolled), in float32 one op at a time.
    const size_t count = x.size() / n;
    const float a = static_cast<float>(lambda);
    const float c = static_cast<float>(1.0 - lambda);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t partner = (i + n - 1) % n;
      for (size_t k = 0; k < count; ++k) {
        volatile float own = x[i * count + k] * a;
        volatile float other = x[partner * count + k] * c;
        const float want = own + other;
        ASSERT_EQ(b.images[i * count + k], want) << n << " " << i << " " << k;
      }
    }
  }
}

TEST(MixKernelsTest, MixUpOfFloat16IsTheFloatBlendRounded) {
  const uint32_t n = 3;
  const size_t count = size_t{3} * kH * kW;
  std::vector<uint16_t> halves(n * count);
  std::vector<float> x(n * count);
  SampleRng rng(3, 0, 0);
  for (size_t k = 0; k < halves.size(); ++k) {
    halves[k] = tensor::FloatToHalf(static_cast<float>(rng.Uniform(-2, 2)));
    x[k] = tensor::HalfToFloat(halves[k]);
  }
  BatchImages view;
  view.image = {reinterpret_cast<uint8_t*>(halves.data()),
                tensor::DType::kFloat16, Layout::kHwc, kH, kW, 3};
  view.size = n;
  kernels::MixUpImages(view, 0.75);
  for (uint32_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < count; ++k) {
      const float want = x[i * count + k] * 0.75f +
                         x[(i + n - 1) % n * count + k] * 0.25f;
      ASSERT_EQ(halves[i * count + k], tensor::FloatToHalf(want));
    }
  }
}

// CutMix on a uint8 batch whose sample i is i + 1 everywhere: the pixels
// of sample i that hold i's partner's value form one box, its share of the
// image is the partner's label weight, and the rest keeps i's own.
TEST(CutmixOpTest, PastedBoxAndLabelWeightAgree) {
  const std::unique_ptr<BatchOp> op =
      MakeBatchOp("cutmix", {{"alpha", 1.0}, {"num_classes", int64_t{kClasses}}});
  const uint32_t n = 5;
  int partial = 0;
  for (uint64_t step = 0; step < 300; ++step) {
    for (const Layout layout : {Layout::kHwc, Layout::kChw}) {
      TestBatch b;
      MakeBatch(b, n, tensor::DType::kUint8, layout, 1);
      SampleRng rng = SampleRng::ForBatch(1, 0, step, 0);
      ASSERT_THAT(op->Apply(b.view, rng), IsOk());
      const auto* bytes = reinterpret_cast<const uint8_t*>(b.images.data());
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t partner = (i + n - 1) % n;
        int from_partner = 0, own = 0;
        int top = kH, left = kW, bottom = -1, right = -1;
        for (int y = 0; y < kH; ++y) {
          for (int x = 0; x < kW; ++x) {
            for (int c = 0; c < 3; ++c) {
              const size_t at = layout == Layout::kHwc
                                    ? (static_cast<size_t>(y) * kW + x) * 3 + c
                                    : (static_cast<size_t>(c) * kH + y) * kW + x;
              const uint8_t v = bytes[i * 3 * kH * kW + at];
              if (v == partner + 1 && partner != i) {
                ++from_partner;
                top = std::min(top, y);
                bottom = std::max(bottom, y);
                left = std::min(left, x);
                right = std::max(right, x);
              } else {
                ASSERT_EQ(v, i + 1);
                ++own;
              }
            }
          }
        }
        const float* soft = b.soft.data() + i * kClasses;
        const double partner_share = from_partner / (3.0 * kH * kW);
        EXPECT_NEAR(soft[partner % kClasses], partner_share, 1e-6) << step;
        EXPECT_NEAR(soft[i % kClasses], 1.0 - partner_share, 1e-6) << step;
        if (from_partner > 0) {
          // One solid box, in every channel.
          EXPECT_EQ(from_partner,
                    3 * (bottom - top + 1) * (right - left + 1));
          partial += from_partner < 3 * kH * kW ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(partial, 1000);  // Most draws paste a box smaller than the image.
}

TEST(CutmixOpTest, BoxFollowsTorchvisionsFormula) {
  // lambda 0.19: r = 0.5 * 0.9 = 0.45, half sides int(5.4) = 5 and
  // int(4.5) = 4 around the centre drawn x then y, clamped.
  SampleRng rng = SampleRng::ForBatch(3, 0, 0, 0);
  SampleRng same = SampleRng::ForBatch(3, 0, 0, 0);
  const int r_x = static_cast<int>(same.UniformInt(0, kW - 1));
  const int r_y = static_cast<int>(same.UniformInt(0, kH - 1));
  const kernels::CutBox box = kernels::DrawCutBox(kH, kW, 0.19, rng);
  EXPECT_EQ(box.x1, std::max(r_x - 5, 0));
  EXPECT_EQ(box.x2, std::min(r_x + 5, kW));
  EXPECT_EQ(box.y1, std::max(r_y - 4, 0));
  EXPECT_EQ(box.y2, std::min(r_y + 4, kH));
  EXPECT_DOUBLE_EQ(box.lambda, 1.0 - (box.x2 - box.x1) * (box.y2 - box.y1) /
                                         double{kW * kH});
}

TEST(MixOpTest, ProbZeroLeavesTheBatchAndItsLabels) {
  const std::unique_ptr<BatchOp> op = MakeBatchOp(
      "mixup", {{"alpha", 0.2}, {"num_classes", int64_t{kClasses}}, {"prob", 0.0}});
  TestBatch b;
  MakeBatch(b, 4, tensor::DType::kFloat32, Layout::kChw, 2);
  const TestBatch before = b;
  SampleRng rng = SampleRng::ForBatch(1, 0, 0, 0);
  ASSERT_THAT(op->Apply(b.view, rng), IsOk());
  EXPECT_EQ(b.images, before.images);
  EXPECT_EQ(b.soft, before.soft);
}

TEST(MixOpTest, SwitchProbPicksCutmixThatShareOfBatches) {
  const std::unique_ptr<BatchOp> op = MakeBatchOp(
      "mixup_cutmix", {{"mixup_alpha", 1.0}, {"cutmix_alpha", 1.0},
                       {"switch_prob", 0.3}, {"num_classes", int64_t{kClasses}}});
  int cutmix = 0;
  const int batches = 2000;
  for (int step = 0; step < batches; ++step) {
    TestBatch b;
    MakeBatch(b, 3, tensor::DType::kFloat32, Layout::kChw, 4);
    const std::vector<float> x = b.images;
    SampleRng rng = SampleRng::ForBatch(2, 0, step, 0);
    ASSERT_THAT(op->Apply(b.view, rng), IsOk());
    // CutMix leaves each value one of the two samples'; MixUp blends all.
    int unchanged = 0;
    for (size_t k = 0; k < x.size() / 3; ++k) {
      unchanged += b.images[k] == x[k] ? 1 : 0;
    }
    cutmix += unchanged > 0 ? 1 : 0;
  }
  EXPECT_NEAR(cutmix, 0.3 * batches, 5 * std::sqrt(0.21 * batches));
}

// A pipeline [decode_image, center_crop, normalize float32, `batch_op`] on
// records of {image, label int64}.
std::unique_ptr<BoundPipeline> BindWithLabels(const OpConfig& batch_op) {
  auto pipeline = Pipeline::Create(
      "p", {{"decode_image", {}, 0},
            {"center_crop", {{"size", Floats{1.0 * kH, 1.0 * kW}}}, 0},
            {"normalize", {{"mean", Floats{0, 0, 0}}, {"std", Floats{1, 1, 1}}},
             0},
            batch_op});
  EXPECT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind(
      {InputField::Image("image"),
       InputField::Dense("label", tensor::DType::kInt64)});
  EXPECT_THAT(bound, IsOk());
  return *std::move(bound);
}

// Runs `bound` on `labels.size()` samples into one batch laid out as the
// stream lays it: each output's samples back to back.
struct RunBatch {
  std::vector<std::vector<uint8_t>> tensors;
  absl::Status status;
};
RunBatch RunSamples(const BoundPipeline& bound,
                    const std::vector<int64_t>& labels) {
  static const std::string* png = new std::string(
      ::stoker::testing::MakePng(kW, kH, ::stoker::testing::PngColor::kRgb, 8,
                                 false, 3)
          .bytes);
  RunBatch out;
  const size_t n = labels.size();
  for (const tensor::TensorSpec& spec : bound.outputs()) {
    out.tensors.emplace_back(spec.bytes() * n);
  }
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t*> dst;
    for (size_t t = 0; t < out.tensors.size(); ++t) {
      dst.push_back(out.tensors[t].data() + i * bound.outputs()[t].bytes());
    }
    std::string label(8, '\0');
    std::memcpy(label.data(), &labels[i], 8);
    const std::string_view fields[] = {*png, label};
    SampleRng rng(1, 0, i);
    out.status = bound.Run(fields, rng, dst, nullptr);
    if (!out.status.ok()) return out;
  }
  return out;
}

TEST(SoftLabelsTest, AreTheSmoothedOneHotAndSumToOneAfterMixing) {
  for (const double smoothing : {0.0, 0.1, 0.35}) {
    const std::unique_ptr<BoundPipeline> bound = BindWithLabels(
        {"mixup_cutmix",
         {{"mixup_alpha", 0.8}, {"cutmix_alpha", 1.0},
          {"num_classes", int64_t{kClasses}}, {"label_smoothing", smoothing}},
         0});
    ASSERT_EQ(bound->outputs().back().name, "label_soft");
    EXPECT_EQ(bound->outputs().back().dtype, tensor::DType::kFloat32);
    EXPECT_EQ(bound->outputs().back().shape, std::vector<int64_t>{kClasses});
    const std::vector<int64_t> labels = {3, 0, 6, 3, 1};
    RunBatch batch = RunSamples(*bound, labels);
    ASSERT_THAT(batch.status, IsOk());
    auto* soft = reinterpret_cast<float*>(batch.tensors.back().data());
    const float off = static_cast<float>(smoothing / kClasses);
    const float on = static_cast<float>(1 - smoothing + smoothing / kClasses);
    for (size_t i = 0; i < labels.size(); ++i) {
      for (int k = 0; k < kClasses; ++k) {
        ASSERT_EQ(soft[i * kClasses + k], k == labels[i] ? on : off);
      }
    }
    for (uint64_t step = 0; step < 20; ++step) {
      std::vector<uint8_t*> tensors;
      for (auto& t : batch.tensors) tensors.push_back(t.data());
      SampleRng rng = SampleRng::ForBatch(1, 0, step, 0);
      ASSERT_THAT(bound->RunBatch(tensors, labels.size(), rng), IsOk());
      for (size_t i = 0; i < labels.size(); ++i) {
        const float* row = soft + i * kClasses;
        const double sum = std::accumulate(row, row + kClasses, 0.0);
        ASSERT_NEAR(sum, 1.0, 1e-6) << smoothing << " " << step;
        for (int k = 0; k < kClasses; ++k) ASSERT_GE(row[k], off - 1e-7);
      }
    }
  }
}

TEST(SoftLabelsTest, LabelOutOfRangeIsThatSamplesDataLoss) {
  const std::unique_ptr<BoundPipeline> bound =
      BindWithLabels({"cutmix", {{"num_classes", int64_t{kClasses}}}, 0});
  EXPECT_THAT(RunSamples(*bound, {kClasses}).status,
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("label 7 of field 'label'"),
                             HasSubstr("[0, 7)"))));
  EXPECT_THAT(RunSamples(*bound, {-1}).status,
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("label -1")));
  EXPECT_THAT(RunSamples(*bound, {kClasses - 1}).status, IsOk());
}

TEST(BatchOpPipelineTest, CreateRefusesMisplacedOrSecondBatchOps) {
  const OpConfig decode{"decode_image", {}, 0};
  const OpConfig crop{"center_crop", {{"size", Floats{8}}}, 0};
  const OpConfig to_float{
      "normalize", {{"mean", Floats{0, 0, 0}}, {"std", Floats{1, 1, 1}}}, 0};
  const OpConfig mixup{"mixup", {{"num_classes", int64_t{4}}}, 3};
  const OpConfig cutmix{"cutmix", {{"num_classes", int64_t{4}}}, 4};
  EXPECT_THAT(Pipeline::Create("p", {decode, crop, mixup}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("uint8 output would round")));
  EXPECT_THAT(Pipeline::Create("p", {decode, crop, cutmix}), IsOk());
  EXPECT_THAT(Pipeline::Create("p", {decode, crop, to_float, mixup, cutmix}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("one batch op")));
  EXPECT_THAT(Pipeline::Create("p", {decode, crop, cutmix, to_float}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("op[3] 'normalize'"),
                             HasSubstr("must come before batch ops"))));
  EXPECT_THAT(
      Pipeline::Create("p", {decode, crop, to_float,
                             {"mixup_cutmix",
                              {{"mixup_alpha", 0.0}, {"num_classes", int64_t{4}}},
                              0}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("mixup_alpha or cutmix_alpha")));
}

TEST(BatchOpPipelineTest, BindNeedsAnIntegerScalarLabel) {
  auto pipeline = Pipeline::Create(
      "p", {{"decode_image", {}, 0},
            {"center_crop", {{"size", Floats{8}}}, 0},
            {"cutmix", {{"num_classes", int64_t{4}}, {"label", std::string("cls")}}, 0}});
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_THAT(
      (*pipeline)->Bind({InputField::Image("image"),
                         InputField::Dense("label", tensor::DType::kInt64)}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("label field 'cls' is not in the dataset"),
                     HasSubstr("image, label"))));
  EXPECT_THAT(
      (*pipeline)->Bind({InputField::Image("image"),
                         InputField::Dense("cls", tensor::DType::kFloat32)}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("must be an integer scalar, not float32")));
  auto bound = (*pipeline)->Bind(
      {InputField::Image("image"),
       InputField::Dense("cls", tensor::DType::kInt32)});
  ASSERT_THAT(bound, IsOk());
  EXPECT_EQ((*bound)->outputs().back().name, "cls_soft");
}

}  // namespace
}  // namespace stoker::pipeline
