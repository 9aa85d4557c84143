#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "server/dataset/field_kind.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

TEST(ScalarKindTest, EachScalarImpliesItsDTypeAndAnEmptyShape) {
  for (auto [kind, dtype] : {std::pair{"int64", tensor::DType::kInt64},
                             {"float32", tensor::DType::kFloat32},
                             {"float64", tensor::DType::kFloat64}}) {
    const FieldSpec spec = MakeFieldSpec("x", kind).value();
    EXPECT_EQ(spec.kind->name(), kind);
    EXPECT_EQ(spec.dtype, dtype) << kind;
    EXPECT_TRUE(spec.shape.empty()) << kind;
    EXPECT_EQ(spec.kind->passthrough(spec), FieldKind::Passthrough::kDense);
    EXPECT_FALSE(spec.kind->spatial());
    EXPECT_FALSE(spec.kind->declares_dtype());
  }
}

TEST(ScalarKindTest, AcceptsExactlyTheElementSize) {
  const FieldSpec label = MakeFieldSpec("label", "int64").value();
  EXPECT_TRUE(label.kind->CheckValue(label, EncodeInt64(-3)).ok());
  EXPECT_EQ(label.kind->CheckValue(label, "12345").ToString(),
            "DATA_LOSS: field 'label' has 5 bytes, int64 needs 8");
  EXPECT_EQ(label.kind->CheckValue(label, "").ToString(),
            "DATA_LOSS: field 'label' has 0 bytes, int64 needs 8");

  const FieldSpec weight = MakeFieldSpec("weight", "float32").value();
  const float w = 0.25f;
  std::string bytes(sizeof(w), '\0');
  std::memcpy(bytes.data(), &w, sizeof(w));
  EXPECT_TRUE(weight.kind->CheckValue(weight, bytes).ok());
  EXPECT_EQ(weight.kind->CheckContent(weight, bytes + bytes).ToString(),
            "DATA_LOSS: field 'weight' has 8 bytes, float32 needs 4");

  const FieldSpec target = MakeFieldSpec("target", "float64").value();
  EXPECT_TRUE(target.kind->CheckValue(target, std::string(8, '\0')).ok());
  EXPECT_EQ(target.kind->CheckValue(target, bytes).ToString(),
            "DATA_LOSS: field 'target' has 4 bytes, float64 needs 8");
}

TEST(ScalarKindTest, DescribesItselfByItsKind) {
  EXPECT_EQ(DescribeField(MakeFieldSpec("label", "int64").value()),
            "label (int64)");
}

}  // namespace
}  // namespace stoker::dataset
