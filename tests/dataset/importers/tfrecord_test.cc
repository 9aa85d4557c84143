#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "server/dataset/importers/example_proto.h"
#include "server/dataset/importers/tfrecord_format.h"

namespace stoker::dataset {
namespace {

std::string Le(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}

std::string Frame(const std::string& data) {
  const std::string len = Le(data.size(), 8);
  return len + Le(MaskCrc(Crc32c(len)), 4) + data +
         Le(MaskCrc(Crc32c(data)), 4);
}

absl::StatusOr<TfRecordListing> List(const std::string& file) {
  return ListTfRecords(
      [&file](uint64_t off, uint64_t n, std::string* out) {
        out->assign(file.substr(off, n));
        return absl::OkStatus();
      },
      file.size());
}

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(TfRecordTest, FramesRecordsAndChecksBothCrcs) {
  const std::string file = Frame("first") + Frame("") + Frame("third");
  absl::StatusOr<TfRecordListing> l = List(file);
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->broken);
  ASSERT_EQ(l->records.size(), 3u);
  EXPECT_EQ(l->records[2].offset, (16 + 5) + 16);
  const TfRecordEntry& r = l->records[2];
  EXPECT_EQ(*CheckTfRecord(file.substr(r.offset, 16 + r.length), r.offset),
            "third");

  std::string bad = file;
  bad[r.offset + 12 + 1] ^= 0x20;  // "tHird".
  EXPECT_EQ(CheckTfRecord(bad.substr(r.offset, 16 + r.length), r.offset)
                .status()
                .ToString(),
            "DATA_LOSS: record at byte 37: data CRC mismatch");
}

TEST(TfRecordTest, ABadLengthCrcStopsFramingThere) {
  std::string file = Frame("first") + Frame("second");
  file[21 + 8] ^= 1;  // The second record's length CRC.
  absl::StatusOr<TfRecordListing> l = List(file);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->records.size(), 1u);
  EXPECT_TRUE(l->broken);
  EXPECT_EQ(l->broken_at, 21u);
  EXPECT_EQ(l->why,
            "length CRC mismatch; the rest of the file cannot be framed");
}

TEST(TfRecordTest, ATruncatedRecordIsReported) {
  const std::string file = Frame("first").substr(0, 18);
  absl::StatusOr<TfRecordListing> l = List(file);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->broken);
  EXPECT_EQ(l->why, "truncated record: 5 data bytes announced, 6 bytes left");
}

// Protobuf wire format by hand, as the Example reader must read it.
std::string Varint(uint64_t v) {
  std::string s;
  do {
    s.push_back(static_cast<char>((v & 0x7F) | (v > 0x7F ? 0x80 : 0)));
    v >>= 7;
  } while (v != 0);
  return s;
}
std::string Field(int number, const std::string& payload) {
  return Varint(number << 3 | 2) + Varint(payload.size()) + payload;
}
std::string Entry(const std::string& key, const std::string& feature) {
  return Field(1, Field(1, key) + Field(2, feature));
}

TEST(ExampleProtoTest, ReadsBytesPackedAndUnpackedLists) {
  float f[2] = {0.5f, -2.0f};
  const std::string floats(reinterpret_cast<const char*>(f), 8);
  // An unpacked int64 list: tag 0x08 per value; -1 is ten varint bytes.
  const std::string unpacked = std::string("\x08\x07", 2) + "\x08" +
                               Varint(~uint64_t{0});
  const std::string features =
      Entry("image/encoded", Field(1, Field(1, "JPEG") + Field(1, "2nd"))) +
      Entry("image/class/label", Field(3, Field(1, Varint(417)))) +
      Entry("ids", Field(3, unpacked)) +
      Entry("bbox", Field(2, Field(1, floats)));
  // The features view the record's bytes: the record outlives them.
  const std::string example = Field(1, features);
  absl::StatusOr<ExampleFeatures> e = ParseExample(example);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->size(), 4u);
  EXPECT_EQ(e->at("image/encoded").bytes.size(), 2u);
  EXPECT_EQ(e->at("image/encoded").bytes[0], "JPEG");
  EXPECT_EQ(e->at("image/class/label").int64s, std::vector<int64_t>{417});
  EXPECT_EQ(e->at("ids").int64s, (std::vector<int64_t>{7, -1}));
  EXPECT_EQ(e->at("bbox").floats, (std::vector<float>{0.5f, -2.0f}));
}

TEST(ExampleProtoTest, TruncationAndGroupsAreDataLossWithTheOffset) {
  const std::string good =
      Field(1, Entry("k", Field(1, Field(1, "value"))));
  EXPECT_EQ(ParseExample(good.substr(0, good.size() - 2)).status().ToString(),
            "DATA_LOSS: Example: truncated length-delimited field at byte 2");
  EXPECT_EQ(ParseExample("\x0b").status().ToString(),
            "DATA_LOSS: Example: unsupported wire type 3 at byte 1");
}

}  // namespace
}  // namespace stoker::dataset
