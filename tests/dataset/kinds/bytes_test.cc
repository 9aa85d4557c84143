#include <string>

#include "gtest/gtest.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

TEST(BytesKindTest, BytesAndStrAreRaggedBytes) {
  for (const char* kind : {"bytes", "str"}) {
    const FieldSpec spec = MakeFieldSpec("x", kind).value();
    EXPECT_EQ(spec.kind->passthrough(spec),
              FieldKind::Passthrough::kRaggedBytes);
    EXPECT_EQ(spec.shape, (std::vector<int64_t>{-1})) << kind;
    EXPECT_FALSE(spec.kind->spatial()) << kind;
    EXPECT_TRUE(spec.kind->CheckValue(spec, "").ok()) << kind;
    EXPECT_EQ(RaggedLength(spec, "hello"), 5u);
  }
}

TEST(BytesKindTest, AStrMustBeUtf8WhenPackedButAReadDoesNotLook) {
  const FieldSpec caption = MakeFieldSpec("caption", "str").value();
  EXPECT_TRUE(
      caption.kind->CheckContent(caption, "caf\xc3\xa9 {\"a\": 1}").ok());
  const std::string latin1 = "caf\xe9!";
  EXPECT_EQ(caption.kind->CheckContent(caption, latin1).ToString(),
            "DATA_LOSS: field 'caption': not UTF-8 at byte 3 of 5 (a str must "
            "be UTF-8; store other text as bytes)");
  // A truncated sequence at the end.
  EXPECT_EQ(caption.kind->CheckContent(caption, "ab\xc3").ToString(),
            "DATA_LOSS: field 'caption': not UTF-8 at byte 2 of 3 (a str must "
            "be UTF-8; store other text as bytes)");
  EXPECT_TRUE(caption.kind->CheckValue(caption, latin1).ok());

  const FieldSpec blob = MakeFieldSpec("blob", "bytes").value();
  EXPECT_TRUE(blob.kind->CheckContent(blob, latin1).ok());
}

TEST(BytesKindTest, RefusesAValueOverMaxLength) {
  FieldSpec caption = MakeFieldSpec("caption", "str").value();
  caption.max_length = 3;
  EXPECT_TRUE(caption.kind->CheckValue(caption, "abc").ok());
  EXPECT_EQ(caption.kind->CheckContent(caption, "abcd").ToString(),
            "DATA_LOSS: field 'caption': 4 bytes, over the manifest's "
            "max_length 3");
  EXPECT_EQ(DescribeField(caption), "caption (str, max_length 3)");
}

}  // namespace
}  // namespace stoker::dataset
