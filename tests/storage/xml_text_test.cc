#include "server/storage/xml_text.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::storage {
namespace {

using ::testing::ElementsAre;

TEST(XmlTextTest, ReadsAListObjectsAnswer) {
  const char* xml =
      "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"x\"><KeyCount>2"
      "</KeyCount><Contents><Key>p/a&amp;b.lmdb</Key><Size>10</Size>"
      "</Contents><Contents><Key>p/&#233;.idx</Key><Size>7</Size></Contents>"
      "<IsTruncated>false</IsTruncated><Prefix/></ListBucketResult>";
  EXPECT_THAT(XmlTexts(xml, "Key"),
              ElementsAre("p/a&b.lmdb", "p/\xc3\xa9.idx"));
  EXPECT_THAT(XmlTexts(xml, "Size"), ElementsAre("10", "7"));
  EXPECT_EQ(XmlText(xml, "KeyCount").value(), "2");
  EXPECT_EQ(XmlText(xml, "Prefix").value(), "");
  EXPECT_FALSE(XmlText(xml, "UploadId").has_value());
}

TEST(XmlTextTest, EscapesWhatItWrites) {
  EXPECT_EQ(XmlEscape("\"e<t>&'"), "&quot;e&lt;t&gt;&amp;&apos;");
}

}  // namespace
}  // namespace stoker::storage
