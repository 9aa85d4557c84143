#include "server/service/batch.h"

#include <algorithm>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::service {
namespace {

using tensor::DType;
using tensor::TensorSpec;

BatchLayout TwoTensorLayout(uint32_t batch_size) {
  return BatchLayout({TensorSpec{"image", DType::kUint8, {3, 5}},
                      TensorSpec{"label", DType::kInt64, {}}},
                     batch_size);
}

TEST(BatchLayoutTest, TensorsAreAlignedAndBackToBack) {
  BatchLayout layout = TwoTensorLayout(4);
  EXPECT_EQ(layout.Offset(0, 4), 0u);
  EXPECT_EQ(layout.Offset(1, 4), 64u);  // 60 bytes of image, aligned up.
  EXPECT_EQ(layout.Bytes(4), 64u + 32u);
  EXPECT_EQ(layout.Bytes(1), 64u + 8u);
}

TEST(BatchLayoutTest, CompactKeepsTheListedSamplesInOrder) {
  BatchLayout layout = TwoTensorLayout(4);
  std::vector<uint8_t> buffer(layout.Bytes(4), 0);
  for (uint32_t i = 0; i < 4; ++i) {
    std::fill_n(layout.SamplePtr(buffer.data(), 0, i), 15, uint8_t(10 + i));
    int64_t label = 100 + i;
    std::memcpy(layout.SamplePtr(buffer.data(), 1, i), &label, 8);
  }
  CompactBatch(layout, buffer.data(), {1, 3});
  std::vector<BatchTensor> tensors = DescribeBatch(layout, 2);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_THAT(tensors[0].spec.shape, ::testing::ElementsAre(2, 3, 5));
  EXPECT_EQ(tensors[1].offset, 64u);
  const uint8_t* image = buffer.data() + tensors[0].offset;
  EXPECT_EQ(image[0], 11);
  EXPECT_EQ(image[14], 11);
  EXPECT_EQ(image[15], 13);
  const int64_t* labels =
      reinterpret_cast<const int64_t*>(buffer.data() + tensors[1].offset);
  EXPECT_EQ(labels[0], 101);
  EXPECT_EQ(labels[1], 103);
}

}  // namespace
}  // namespace stoker::service
