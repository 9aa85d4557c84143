#include "server/service/remote_batch.h"

#include <memory>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::service {
namespace {

using tensor::DType;
using tensor::TensorSpec;
using ::testing::HasSubstr;

// image uint8 [2] and label int64 [] per sample, batches of 3.
BatchLayout Layout() {
  TensorSpec image;
  image.name = "image";
  image.dtype = DType::kUint8;
  image.shape = {2};
  TensorSpec label;
  label.name = "label";
  label.dtype = DType::kInt64;
  return BatchLayout(std::vector<TensorSpec>{image, label}, 3);
}

// A helper's batch of samples {10, 12} with 11 skipped.
struct Helper {
  std::string image = "abcd";
  std::vector<int64_t> labels = {1, 2};
  RemoteBatch batch;
  Helper() {
    batch.epoch = 1;
    batch.step = 4;
    batch.sample_ids = {10, 12};
    batch.skipped_ids = {11};
    batch.tensors.push_back({"image",
                             DType::kUint8,
                             {2, 2},
                             reinterpret_cast<const uint8_t*>(image.data()),
                             image.size()});
    batch.tensors.push_back({"label",
                             DType::kInt64,
                             {2},
                             reinterpret_cast<const uint8_t*>(labels.data()),
                             16});
  }
};

const std::vector<uint64_t> kIds = {10, 11, 12};
const std::vector<uint32_t> kNoReps = {0, 0, 0};

TEST(TakeHelperBatchTest, PacksTheBatchAsThisDaemonWould) {
  Helper h;
  std::vector<uint8_t> buffer(Layout().Capacity());
  absl::StatusOr<ReadyBatch> ready =
      TakeHelperBatch(Layout(), 1, 4, kIds, kNoReps, false, h.batch,
                      buffer.data(), buffer.size());
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->skipped_ids, std::vector<uint64_t>{11});
  ASSERT_EQ(ready->tensors.size(), 2u);
  EXPECT_EQ(ready->tensors[0].offset, 0u);
  EXPECT_EQ(ready->tensors[1].offset, 64u);  // Aligned as FinishBatch does.
  EXPECT_EQ(ready->tensors[1].spec.shape, std::vector<int64_t>{2});
  EXPECT_EQ(ready->bytes, 80u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buffer.data()), 4), "abcd");
  int64_t second = 0;
  std::memcpy(&second, buffer.data() + 72, 8);
  EXPECT_EQ(second, 2);
}

TEST(TakeHelperBatchTest, RefusesAnotherPlanPositionOrPipeline) {
  std::vector<uint8_t> buffer(Layout().Capacity());
  auto take = [&](const RemoteBatch& b, bool fail_on_corrupt = false) {
    return TakeHelperBatch(Layout(), 1, 4, kIds, kNoReps, fail_on_corrupt, b,
                           buffer.data(), buffer.size())
        .status();
  };
  Helper other_ids;
  other_ids.batch.sample_ids = {10, 13};
  EXPECT_THAT(take(other_ids.batch).message(), HasSubstr("sample 12"));
  Helper other_step;
  other_step.batch.step = 5;
  EXPECT_THAT(take(other_step.batch).message(), HasSubstr("step 5"));
  Helper other_shape;
  other_shape.batch.tensors[0].shape = {2, 1, 2};
  EXPECT_THAT(take(other_shape.batch).message(), HasSubstr("tensor 'image'"));
  Helper skipped;
  EXPECT_THAT(take(skipped.batch, /*fail_on_corrupt=*/true).message(),
              HasSubstr("on_corrupt is fail"));
}

// With ra_reps > 1 a step can hold two copies of one sample: the helper's
// batch must hold each (id, rep) where this daemon's plan has it, and its
// reps come through to the delivered batch.
TEST(TakeHelperBatchTest, MatchesCopiesByIdAndRep) {
  const std::vector<uint64_t> ids = {10, 10, 12};
  const std::vector<uint32_t> reps = {0, 1, 3};
  std::vector<uint8_t> buffer(Layout().Capacity());
  auto take = [&](const RemoteBatch& b) {
    return TakeHelperBatch(Layout(), 1, 4, ids, reps, false, b, buffer.data(),
                           buffer.size());
  };
  Helper h;
  h.batch.sample_ids = {10, 12};
  h.batch.sample_reps = {0, 3};
  h.batch.skipped_ids = {10};
  h.batch.skipped_reps = {1};
  absl::StatusOr<ReadyBatch> ready = take(h.batch);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->sample_reps, (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(ready->skipped_reps, std::vector<uint32_t>{1});

  Helper other_copy = h;  // Copy 2 where the plan has copy 1.
  other_copy.batch.sample_reps = {2, 3};
  other_copy.batch.skipped_reps = {0};
  EXPECT_THAT(take(other_copy.batch).status().message(),
              HasSubstr("sample 10 copy 1 where"));
  Helper no_reps = h;  // A helper that ignored ra_reps.
  no_reps.batch.sample_reps.clear();
  no_reps.batch.skipped_reps.clear();
  EXPECT_THAT(take(no_reps.batch).status().message(),
              HasSubstr("sample 10 copy 1 where"));
  Helper short_reps = h;
  short_reps.batch.sample_reps = {0};
  EXPECT_THAT(take(short_reps.batch).status().message(),
              HasSubstr("another length"));
}

// The node's own pipeline: a 2x2 centre crop, normalized to float32 CHW,
// which a helper sends as uint8 HWC renderings.
std::unique_ptr<pipeline::BoundPipeline> Normalizing() {
  const pipeline::OpArgs normalize = {
      {"mean", std::vector<double>{0.5, 0.25, 0.0}},
      {"std", std::vector<double>{0.5, 0.5, 0.25}}};
  auto p = pipeline::Pipeline::Create(
      "p", std::vector<pipeline::OpConfig>{
               {"decode_jpeg", {}, 0},
               {"center_crop", {{"size", int64_t{2}}}, 0},
               {"normalize", normalize, 0},
               {"layout", {{"value", std::string("chw")}}, 0}});
  EXPECT_TRUE(p.ok()) << p.status();
  auto bound = (*p)->Bind(
      {pipeline::InputField::Image("image"),
       pipeline::InputField::Dense("label", tensor::DType::kInt64)});
  EXPECT_TRUE(bound.ok()) << bound.status();
  return *std::move(bound);
}

TEST(TakeHelperBatchTest, FinishesARenderingIntoThisDaemonsFormat) {
  std::unique_ptr<pipeline::BoundPipeline> pipeline = Normalizing();
  const BatchLayout layout(pipeline->slots(), 3);
  const BatchLayout sent(pipeline->RenderedSlots(), 3);
  // Two samples of 2x2 RGB, and their labels.
  std::vector<uint8_t> pixels(2 * 12);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i * 10);
  std::vector<int64_t> labels = {1, 2};
  RemoteBatch batch;
  batch.rendered = true;
  batch.epoch = 1;
  batch.step = 4;
  batch.sample_ids = {10, 12};
  batch.skipped_ids = {11};
  batch.tensors.push_back(
      {"image", DType::kUint8, {2, 2, 2, 3}, pixels.data(), pixels.size()});
  batch.tensors.push_back({"label", DType::kInt64, {2},
                           reinterpret_cast<const uint8_t*>(labels.data()),
                           16});
  std::vector<uint8_t> buffer(layout.Capacity());
  const RenderedFinish finish{&sent, pipeline.get()};
  absl::StatusOr<ReadyBatch> ready =
      TakeHelperBatch(layout, 1, 4, kIds, kNoReps, false, batch,
                      buffer.data(), buffer.size(), &finish);
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_EQ(ready->tensors.size(), 2u);
  const BatchTensor& image = ready->tensors[0];
  EXPECT_EQ(image.spec.dtype, DType::kFloat32);
  EXPECT_EQ(image.spec.shape, (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(image.length, 2u * 12 * 4);
  for (int i = 0; i < 2; ++i) {
    std::vector<uint8_t> want(48);
    pipeline->FormatRendered(0, pixels.data() + i * 12, want.data());
    EXPECT_EQ(std::memcmp(buffer.data() + image.offset + i * 48, want.data(),
                          48),
              0)
        << "sample " << i;
  }
  // Channel 0 of sample 0's pixel (0, 0): (0 / 255 - 0.5) / 0.5.
  float first;
  std::memcpy(&first, buffer.data() + image.offset, 4);
  EXPECT_FLOAT_EQ(first, -1.0f);
  const BatchTensor& label = ready->tensors[1];
  EXPECT_EQ(std::memcmp(buffer.data() + label.offset, labels.data(), 16), 0);

  // A rendering where the stream has no way to finish one, and a float
  // image where a rendering was announced, are refused.
  EXPECT_THAT(TakeHelperBatch(layout, 1, 4, kIds, kNoReps, false, batch,
                              buffer.data(), buffer.size())
                  .status()
                  .message(),
              HasSubstr("cannot finish"));
  RemoteBatch floats = batch;
  floats.tensors[0].dtype = DType::kFloat32;
  EXPECT_THAT(TakeHelperBatch(layout, 1, 4, kIds, kNoReps, false, floats,
                              buffer.data(), buffer.size(), &finish)
                  .status()
                  .message(),
              HasSubstr("tensor 'image' is not this daemon's output"));
}

}  // namespace
}  // namespace stoker::service
