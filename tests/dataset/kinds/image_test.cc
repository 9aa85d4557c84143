#include <string>

#include "gtest/gtest.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

TEST(ImageKindTest, IsSpatialRaggedBytes) {
  const FieldSpec spec = MakeFieldSpec("image", "image").value();
  EXPECT_TRUE(spec.kind->spatial());
  EXPECT_EQ(spec.kind->passthrough(spec), FieldKind::Passthrough::kRaggedBytes);
  EXPECT_EQ(spec.dtype, tensor::DType::kUint8);
  EXPECT_EQ(spec.shape, (std::vector<int64_t>{-1}));
}

TEST(ImageKindTest, RefusesAnEmptyValueAndOneOverMaxLength) {
  FieldSpec spec = MakeFieldSpec("photo", "image").value();
  // A kind does not decode: any bytes pass, the ImageCheck judges them.
  EXPECT_TRUE(spec.kind->CheckValue(spec, "\xff\xd8\xff junk").ok());
  EXPECT_EQ(spec.kind->CheckValue(spec, "").ToString(),
            "DATA_LOSS: field 'photo': empty, no image bytes");
  spec.max_length = 4;
  EXPECT_TRUE(spec.kind->CheckContent(spec, "abcd").ok());
  EXPECT_EQ(spec.kind->CheckValue(spec, "abcde").ToString(),
            "DATA_LOSS: field 'photo': 5 bytes, over the manifest's "
            "max_length 4");
}

TEST(ImageKindTest, DescribesItsFormats) {
  FieldSpec spec = MakeFieldSpec("image", "image").value();
  spec.max_length = 48213;
  spec.formats = {{"jpeg", 28}, {"png", 2}};
  EXPECT_EQ(DescribeField(spec),
            "image (image, max_length 48213, formats jpeg 28, png 2)");
}

}  // namespace
}  // namespace stoker::dataset
