#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

using tensor::DType;

TEST(NdarrayKindTest, AFixedShapeIsDenseAVariableFirstDimensionRagged) {
  const FieldSpec fixed =
      MakeArraySpec("embedding", DType::kFloat16, {2, 3}).value();
  EXPECT_EQ(fixed.kind->passthrough(fixed), FieldKind::Passthrough::kDense);
  EXPECT_TRUE(fixed.kind->declares_dtype());
  const FieldSpec boxes =
      MakeArraySpec("boxes", DType::kFloat32, {-1, 4}).value();
  EXPECT_EQ(boxes.kind->passthrough(boxes),
            FieldKind::Passthrough::kRaggedRows);
  EXPECT_EQ(RowBytes(boxes), 16u);
  EXPECT_EQ(RaggedLength(boxes, std::string(48, '\0')), 3u);
  const FieldSpec scalar = MakeArraySpec("t", DType::kInt16, {}).value();
  EXPECT_EQ(scalar.kind->passthrough(scalar), FieldKind::Passthrough::kDense);
  EXPECT_TRUE(scalar.kind->CheckValue(scalar, "ab").ok());
}

TEST(NdarrayKindTest, RefusesBadShapes) {
  EXPECT_EQ(MakeArraySpec("m", DType::kUint8, {4, -1}).status().ToString(),
            "INVALID_ARGUMENT: field 'm': shape: dimension 1 is -1; only the "
            "first may vary");
  EXPECT_EQ(MakeArraySpec("m", DType::kUint8, {-2}).status().ToString(),
            "INVALID_ARGUMENT: field 'm': shape: dimension 0 is -2; "
            "dimensions are positive, or -1 for the first");
  EXPECT_EQ(MakeArraySpec("m", DType::kUint8, {3, 0}).status().ToString(),
            "INVALID_ARGUMENT: field 'm': shape: dimension 1 is 0; "
            "dimensions are positive, or -1 for the first");
  EXPECT_EQ(MakeArraySpec("m", DType::kFloat64, {-1, 1 << 20, 1 << 10})
                .status()
                .ToString(),
            "INVALID_ARGUMENT: field 'm': shape: a row of float64 [-1, "
            "1048576, 1024] is over the 4 GiB a record field may hold");
  EXPECT_EQ(MakeFieldSpec("m", "ndarray").status().ToString(),
            "INVALID_ARGUMENT: field 'm': kind 'ndarray' needs a dtype and "
            "shape (MakeArraySpec)");
}

TEST(NdarrayKindTest, AFixedArrayHasExactlyItsBytes) {
  const FieldSpec spec = MakeArraySpec("emb", DType::kFloat32, {2, 4}).value();
  EXPECT_TRUE(spec.kind->CheckValue(spec, std::string(32, '\0')).ok());
  EXPECT_EQ(spec.kind->CheckValue(spec, std::string(28, '\0')).ToString(),
            "DATA_LOSS: field 'emb' has 28 bytes, float32 [2, 4] needs 32");
}

TEST(NdarrayKindTest, AVariableArrayHoldsWholeRowsUpToMaxLength) {
  FieldSpec boxes = MakeArraySpec("boxes", DType::kFloat32, {-1, 4}).value();
  EXPECT_TRUE(boxes.kind->CheckValue(boxes, "").ok());  // No boxes.
  EXPECT_TRUE(boxes.kind->CheckValue(boxes, std::string(32, '\0')).ok());
  EXPECT_EQ(boxes.kind->CheckValue(boxes, std::string(18, '\0')).ToString(),
            "DATA_LOSS: field 'boxes': 18 bytes is not whole rows of 16 bytes "
            "(float32 [-1, 4])");
  boxes.max_length = 2;
  EXPECT_EQ(boxes.kind->CheckValue(boxes, std::string(48, '\0')).ToString(),
            "DATA_LOSS: field 'boxes': 3 rows, over the manifest's max_length "
            "2");
  EXPECT_EQ(DescribeField(boxes),
            "boxes (ndarray float32 [-1, 4], max_length 2)");
}

TEST(NdarrayKindTest, ABoolArrayHoldsOnlyZeroAndOneWhenPacked) {
  const FieldSpec mask = MakeArraySpec("mask", DType::kBool, {-1}).value();
  const std::string good("\x00\x01\x01", 3);
  const std::string bad("\x00\x01\x07", 3);
  EXPECT_TRUE(mask.kind->CheckContent(mask, good).ok());
  EXPECT_EQ(mask.kind->CheckContent(mask, bad).ToString(),
            "DATA_LOSS: field 'mask': byte 2 is 7; a bool is 0 or 1");
  EXPECT_TRUE(mask.kind->CheckValue(mask, bad).ok());  // Reads do not look.
  const FieldSpec ids = MakeArraySpec("ids", DType::kUint8, {-1}).value();
  EXPECT_TRUE(ids.kind->CheckContent(ids, bad).ok());
}

}  // namespace
}  // namespace stoker::dataset
