#include "server/service/batch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::service {
namespace {

using tensor::DType;
using tensor::OutputSlot;
using tensor::TensorSpec;
using ::testing::ElementsAre;

BatchLayout TwoTensorLayout(uint32_t batch_size) {
  return BatchLayout(
      std::vector<TensorSpec>{
          TensorSpec{"image", DType::kUint8, {3, 5}, {}, false},
          TensorSpec{"label", DType::kInt64, {}, {}, false}},
      batch_size);
}

// label int64 [], then tokens int32 [-1] with room for 4 rows, then its
// offsets.
BatchLayout RaggedLayout(uint32_t batch_size) {
  OutputSlot values;
  values.spec = {"tokens", DType::kInt32, {-1}, {}, false};
  values.kind = OutputSlot::Kind::kRagged;
  values.row_bytes = 4;
  values.max_sample_bytes = 16;
  OutputSlot offsets;
  offsets.spec = {"tokens.offsets", DType::kInt64, {}, "tokens", false};
  offsets.kind = OutputSlot::Kind::kOffsets;
  offsets.max_sample_bytes = 8;
  offsets.values_slot = 1;
  return BatchLayout(
      {OutputSlot::Dense({"label", DType::kInt64, {}, {}, false}), values,
       offsets},
      batch_size);
}

// Writes sample i of RaggedLayout: label 100 + i, `rows` tokens 10 * i + k.
void WriteRaggedSample(const BatchLayout& layout, uint8_t* base, uint32_t i,
                       int rows) {
  const int64_t label = 100 + i;
  std::memcpy(layout.SamplePtr(base, 0, i), &label, 8);
  for (int k = 0; k < rows; ++k) {
    const int32_t token = static_cast<int32_t>(10 * i + k);
    std::memcpy(layout.SamplePtr(base, 1, i) + 4 * k, &token, 4);
  }
  const int64_t count = rows;
  std::memcpy(layout.SamplePtr(base, 2, i), &count, 8);
}

template <typename T>
std::vector<T> Values(const uint8_t* base, const BatchTensor& t) {
  std::vector<T> out(t.length / sizeof(T));
  std::memcpy(out.data(), base + t.offset, t.length);
  return out;
}

TEST(BatchLayoutTest, TensorsAreAlignedAndBackToBack) {
  BatchLayout layout = TwoTensorLayout(4);
  EXPECT_EQ(layout.Offset(0), 0u);
  EXPECT_EQ(layout.Offset(1), 64u);  // 60 bytes of image, aligned up.
  EXPECT_EQ(layout.Capacity(), 64u + 32u);
}

TEST(BatchLayoutTest, RaggedSlotsHoldMaxLengthAndOffsetsOneMore) {
  BatchLayout layout = RaggedLayout(3);
  EXPECT_EQ(layout.Offset(1), 64u);
  EXPECT_EQ(layout.RegionBytes(1), 3u * 16u);
  EXPECT_EQ(layout.Offset(2), 128u);
  EXPECT_EQ(layout.RegionBytes(2), 4u * 8u);
  EXPECT_EQ(layout.Capacity(), 128u + 32u);
  EXPECT_TRUE(layout.ragged());
  EXPECT_FALSE(TwoTensorLayout(3).ragged());
}

TEST(FinishBatchTest, AFullDenseBatchStaysWhereItWasWritten) {
  BatchLayout layout = TwoTensorLayout(2);
  std::vector<uint8_t> buffer(layout.Capacity(), 7);
  size_t bytes = 0;
  std::vector<BatchTensor> tensors =
      FinishBatch(layout, buffer.data(), {0, 1}, &bytes);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].offset, 0u);
  EXPECT_EQ(tensors[1].offset, 64u);
  EXPECT_THAT(tensors[1].spec.shape, ElementsAre(2));
  EXPECT_EQ(bytes, layout.Capacity());
}

TEST(FinishBatchTest, KeepsTheListedDenseSamplesInOrder) {
  BatchLayout layout = TwoTensorLayout(4);
  std::vector<uint8_t> buffer(layout.Capacity(), 0);
  for (uint32_t i = 0; i < 4; ++i) {
    std::fill_n(layout.SamplePtr(buffer.data(), 0, i), 15, uint8_t(10 + i));
    int64_t label = 100 + i;
    std::memcpy(layout.SamplePtr(buffer.data(), 1, i), &label, 8);
  }
  size_t bytes = 0;
  std::vector<BatchTensor> tensors =
      FinishBatch(layout, buffer.data(), {1, 3}, &bytes);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_THAT(tensors[0].spec.shape, ElementsAre(2, 3, 5));
  EXPECT_EQ(tensors[1].offset, 64u);
  EXPECT_EQ(bytes, 64u + 16u);
  const uint8_t* image = buffer.data() + tensors[0].offset;
  EXPECT_EQ(image[0], 11);
  EXPECT_EQ(image[14], 11);
  EXPECT_EQ(image[15], 13);
  EXPECT_THAT(Values<int64_t>(buffer.data(), tensors[1]),
              ElementsAre(101, 103));
}

TEST(FinishBatchTest, PacksRaggedValuesAndWritesPrefixSums) {
  BatchLayout layout = RaggedLayout(3);
  std::vector<uint8_t> buffer(layout.Capacity(), 0xee);
  WriteRaggedSample(layout, buffer.data(), 0, 2);
  WriteRaggedSample(layout, buffer.data(), 1, 0);
  WriteRaggedSample(layout, buffer.data(), 2, 4);
  size_t bytes = 0;
  std::vector<BatchTensor> t =
      FinishBatch(layout, buffer.data(), {0, 1, 2}, &bytes);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_THAT(Values<int64_t>(buffer.data(), t[0]), ElementsAre(100, 101, 102));
  EXPECT_THAT(t[1].spec.shape, ElementsAre(6));
  EXPECT_EQ(t[1].offset, 64u);
  EXPECT_THAT(Values<int32_t>(buffer.data(), t[1]),
              ElementsAre(0, 1, 20, 21, 22, 23));
  EXPECT_EQ(t[2].spec.offsets_for, "tokens");
  EXPECT_THAT(t[2].spec.shape, ElementsAre(4));
  EXPECT_EQ(t[2].offset, 128u);  // 24 bytes of tokens, aligned up.
  EXPECT_THAT(Values<int64_t>(buffer.data(), t[2]), ElementsAre(0, 2, 2, 6));
  EXPECT_EQ(bytes, 128u + 32u);
}

TEST(FinishBatchTest, MovesKeptRaggedSamplesForwardOverSkippedOnes) {
  BatchLayout layout = RaggedLayout(4);
  std::vector<uint8_t> buffer(layout.Capacity(), 0xee);
  WriteRaggedSample(layout, buffer.data(), 0, 4);
  // Sample 1 was skipped: its slots hold whatever its failed run left.
  WriteRaggedSample(layout, buffer.data(), 2, 1);
  WriteRaggedSample(layout, buffer.data(), 3, 3);
  size_t bytes = 0;
  std::vector<BatchTensor> t =
      FinishBatch(layout, buffer.data(), {0, 2, 3}, &bytes);
  EXPECT_THAT(Values<int64_t>(buffer.data(), t[0]), ElementsAre(100, 102, 103));
  EXPECT_EQ(t[1].offset, 64u);
  EXPECT_THAT(Values<int32_t>(buffer.data(), t[1]),
              ElementsAre(0, 1, 2, 3, 20, 30, 31, 32));
  EXPECT_THAT(Values<int64_t>(buffer.data(), t[2]), ElementsAre(0, 4, 5, 8));
  EXPECT_EQ(bytes, t[2].offset + 4 * 8);
}

TEST(FinishBatchTest, AnEmptyBatchHasOneOffset) {
  BatchLayout layout = RaggedLayout(2);
  std::vector<uint8_t> buffer(layout.Capacity(), 0xee);
  size_t bytes = 0;
  std::vector<BatchTensor> t = FinishBatch(layout, buffer.data(), {}, &bytes);
  EXPECT_THAT(t[0].spec.shape, ElementsAre(0));
  EXPECT_THAT(t[1].spec.shape, ElementsAre(0));
  EXPECT_THAT(Values<int64_t>(buffer.data(), t[2]), ElementsAre(0));
}

// A batch buffer of a megabyte or more takes the block a buffer of its size
// let go of (its pages already mapped); other sizes get blocks of their own.
TEST(HeapBatchBufferTest, ALargeBufferReusesTheBlockOfOneOfItsSizeLetGo) {
  constexpr size_t kBytes = (3 << 20) + 100;  // A size no other test uses.
  const uint8_t* first = nullptr;
  {
    HeapBatchBuffer buffer(kBytes);
    first = buffer.data();
    std::memset(buffer.data(), 7, kBytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % BatchLayout::kAlignment, 0u);
  }
  const size_t idle = HeapBatchBuffer::IdleBytes();
  EXPECT_GE(idle, kBytes);
  HeapBatchBuffer other_size(kBytes + 4096);
  EXPECT_NE(other_size.data(), first);
  HeapBatchBuffer again(kBytes);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.capacity(), kBytes);
  EXPECT_EQ(HeapBatchBuffer::IdleBytes(), idle - BatchLayout::AlignUp(kBytes));
}

TEST(HeapBatchBufferTest, TheCacheHoldsABoundedNumberOfBytes) {
  constexpr size_t kBytes = 5 << 20;
  std::vector<std::unique_ptr<HeapBatchBuffer>> buffers;
  const size_t count = HeapBatchBuffer::kMaxIdleBytes / kBytes + 8;
  for (size_t i = 0; i < count; ++i) {
    buffers.push_back(std::make_unique<HeapBatchBuffer>(kBytes));
  }
  buffers.clear();  // Never touched: they cost address space, not memory.
  EXPECT_LE(HeapBatchBuffer::IdleBytes(), HeapBatchBuffer::kMaxIdleBytes);
  EXPECT_GT(HeapBatchBuffer::IdleBytes(),
            HeapBatchBuffer::kMaxIdleBytes - 2 * kBytes);
}

TEST(HeapBatchBufferTest, SmallBuffersAreNotKept) {
  const size_t idle = HeapBatchBuffer::IdleBytes();
  { HeapBatchBuffer small(64 << 10); }
  EXPECT_EQ(HeapBatchBuffer::IdleBytes(), idle);
}

}  // namespace
}  // namespace stoker::service
