#include "server/tensor/dtype.h"

#include <cstdint>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "server/tensor/tensor_spec.h"

namespace stoker::tensor {
namespace {

TEST(DTypeTest, SizesMatchTheCTypes) {
  EXPECT_EQ(DTypeSize(DType::kBool), sizeof(bool));
  EXPECT_EQ(DTypeSize(DType::kUint8), sizeof(uint8_t));
  EXPECT_EQ(DTypeSize(DType::kInt8), sizeof(int8_t));
  EXPECT_EQ(DTypeSize(DType::kUint16), sizeof(uint16_t));
  EXPECT_EQ(DTypeSize(DType::kInt16), sizeof(int16_t));
  EXPECT_EQ(DTypeSize(DType::kInt32), sizeof(int32_t));
  EXPECT_EQ(DTypeSize(DType::kInt64), sizeof(int64_t));
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat32), sizeof(float));
  EXPECT_EQ(DTypeSize(DType::kFloat64), sizeof(double));
}

TEST(DTypeTest, EveryDTypeHasItsOwnNameAndParsesBack) {
  std::set<std::string> names;
  for (DType t : kAllDTypes) {
    const std::string name(DTypeName(t));
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(DTypeFromName(name), t) << name;
    EXPECT_NE(std::string(DTypeNames()).find(name), std::string::npos);
  }
  EXPECT_EQ(names.size(), kAllDTypes.size());
  EXPECT_EQ(DTypeFromName("float"), std::nullopt);
  EXPECT_EQ(DTypeFromName("Float32"), std::nullopt);
  EXPECT_EQ(DTypeFromName(""), std::nullopt);
  EXPECT_EQ(DTypeName(DType::kFloat16), "float16");
}

TEST(DTypeTest, TheListOfNamesReadsAsASentence) {
  EXPECT_EQ(DTypeNames(),
            "bool, uint8, int8, uint16, int16, int32, int64, float16, "
            "float32 or float64");
}

TEST(TensorSpecTest, BytesIsElementsTimesTheElementSize) {
  EXPECT_EQ(
      (TensorSpec{"image", DType::kFloat32, {3, 224, 224}, {}, false}).bytes(),
      3u * 224 * 224 * 4);
  EXPECT_EQ((TensorSpec{"label", DType::kInt64, {}, {}, false}).bytes(), 8u);
  EXPECT_EQ((TensorSpec{"mask", DType::kBool, {5, 7}, {}, false}).bytes(), 35u);
}

}  // namespace
}  // namespace stoker::tensor
