#include "server/dataset/record.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RecordTest, RoundTripsFields) {
  const std::string image(3000, '\xff');
  const std::string label = EncodeInt64(7);
  const std::string value = EncodeRecord({image, label});
  absl::StatusOr<RecordView> record = DecodeRecord(value);
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_THAT(record->fields, ElementsAre(image, label));
  EXPECT_EQ(DecodeInt64(record->fields[1]), 7);
}

TEST(RecordTest, RoundTripsEmptyFieldsAndEmptyRecords) {
  absl::StatusOr<RecordView> two = DecodeRecord(EncodeRecord({"", ""}));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(two->fields, ElementsAre("", ""));
  absl::StatusOr<RecordView> none = DecodeRecord(EncodeRecord({}));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->fields.empty());
}

TEST(RecordTest, LayoutIsCountLengthsBytesThenChecksum) {
  const std::string value = EncodeRecord({"ab"});
  ASSERT_EQ(value.size(), 4u + 4u + 2u + 8u);
  EXPECT_EQ(value.substr(0, 10), std::string("\1\0\0\0\2\0\0\0ab", 10));
}

TEST(RecordTest, ReturnsDataLossOnAnyFlippedByte) {
  const std::string good = EncodeRecord({"some image bytes", EncodeInt64(-3)});
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    const absl::Status s = DecodeRecord(bad).status();
    EXPECT_EQ(s.ToString(), "DATA_LOSS: checksum mismatch") << "byte " << i;
  }
}

TEST(RecordTest, ReturnsDataLossOnTruncatedValue) {
  const std::string good = EncodeRecord({"some image bytes", EncodeInt64(1)});
  for (size_t n = 0; n < good.size(); ++n) {
    const absl::Status s = DecodeRecord(good.substr(0, n)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "length " << n;
  }
  EXPECT_EQ(DecodeRecord(good.substr(0, 5)).status().ToString(),
            "DATA_LOSS: truncated record (5 bytes)");
}

TEST(RecordTest, ReturnsDataLossOnAppendedBytes) {
  EXPECT_EQ(DecodeRecord(EncodeRecord({"x"}) + "!").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(RecordTest, CheckRecordSchemaRejectsWrongFieldCountAndInt64Size) {
  const std::vector<FieldSpec> schema = {
      MakeFieldSpec("image", "image").value(),
      MakeFieldSpec("label", "int64").value()};
  RecordView record;
  record.fields = {"jpeg"};
  EXPECT_EQ(CheckRecordSchema(record, schema).ToString(),
            "DATA_LOSS: record has 1 fields, the schema has 2");
  record.fields = {"jpeg", "12345"};
  EXPECT_EQ(CheckRecordSchema(record, schema).ToString(),
            "DATA_LOSS: field 'label' has 5 bytes, int64 needs 8");
  const std::string label = EncodeInt64(1);
  record.fields = {"jpeg", label};
  EXPECT_TRUE(CheckRecordSchema(record, schema).ok());
  record.fields = {"", label};
  EXPECT_EQ(CheckRecordSchema(record, schema).ToString(),
            "DATA_LOSS: field 'image': empty, no image bytes");
}

TEST(RecordTest, CheckRecordContentAlsoChecksWhatAReadDoesNot) {
  const std::vector<FieldSpec> schema = {
      MakeFieldSpec("caption", "str").value(),
      MakeArraySpec("mask", tensor::DType::kBool, {2}).value()};
  RecordView record;
  record.fields = {"caf\xe9", std::string_view("\x01\x00", 2)};
  EXPECT_TRUE(CheckRecordSchema(record, schema).ok());
  EXPECT_EQ(CheckRecordContent(record, schema).ToString(),
            "DATA_LOSS: field 'caption': not UTF-8 at byte 3 of 4 (a str "
            "must be UTF-8; store other text as bytes)");
  record.fields[0] = "caf\xc3\xa9";
  EXPECT_TRUE(CheckRecordContent(record, schema).ok());
  record.fields[1] = "\x01\x02";
  EXPECT_EQ(CheckRecordContent(record, schema).ToString(),
            "DATA_LOSS: field 'mask': byte 1 is 2; a bool is 0 or 1");
  record.fields = {"x"};
  EXPECT_EQ(CheckRecordContent(record, schema).ToString(),
            "DATA_LOSS: record has 1 fields, the schema has 2");
}

TEST(RecordTest, KeysAreBigEndianSoByteOrderIsIdOrder) {
  EXPECT_EQ(EncodeKey(0x0102), std::string("\0\0\0\0\0\0\1\2", 8));
  EXPECT_LT(EncodeKey(255), EncodeKey(256));
  EXPECT_LT(EncodeKey(0xffffffff), EncodeKey(0x100000000));
  for (uint64_t id : {uint64_t{0}, uint64_t{1234}, ~uint64_t{0}}) {
    absl::StatusOr<uint64_t> back = DecodeKey(EncodeKey(id));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, id);
  }
}

TEST(RecordTest, DecodeKeyRejectsWrongLength) {
  EXPECT_EQ(DecodeKey("1234567").status().ToString(),
            "DATA_LOSS: key has 7 bytes, expected 8");
}

TEST(RecordTest, Int64IsLittleEndianAndRoundTripsExtremes) {
  EXPECT_EQ(EncodeInt64(1), std::string("\1\0\0\0\0\0\0\0", 8));
  for (int64_t v : {int64_t{0}, int64_t{-1}, INT64_MIN, INT64_MAX}) {
    EXPECT_EQ(DecodeInt64(EncodeInt64(v)), v);
  }
}

}  // namespace
}  // namespace stoker::dataset
