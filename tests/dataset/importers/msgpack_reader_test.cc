#include "server/dataset/importers/msgpack_reader.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

std::string B(const char* s, size_t n) { return std::string(s, n); }
#define MSG(s) B(s, sizeof(s) - 1)

TEST(MsgpackReaderTest, ReadsEfficientPytorchsRecord) {
  // msgpack.packb([{b'data': b'jpg'}, 3]) and with use_bin_type=False.
  for (const std::string& m :
       {MSG("\x92\x81\xc4\x04" "data" "\xc4\x03" "jpg" "\x03"),
        MSG("\x92\x81\xa4" "data" "\xa3" "jpg" "\x03")}) {
    absl::StatusOr<MsgValue> v = ParseMsgpack(m);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(v->type, MsgValue::Type::kArray);
    ASSERT_EQ(v->items.size(), 2u);
    const MsgValue& map = v->items[0];
    ASSERT_EQ(map.type, MsgValue::Type::kMap);
    EXPECT_EQ(map.items[0].bytes, "data");
    EXPECT_EQ(map.items[1].bytes, "jpg");
    EXPECT_EQ(v->items[1].integer, 3);
  }
}

TEST(MsgpackReaderTest, ReadsEveryIntegerWidth) {
  EXPECT_EQ(ParseMsgpack("\xff")->integer, -1);
  EXPECT_EQ(ParseMsgpack(MSG("\xcd\x01\x00"))->integer, 256);
  EXPECT_EQ(ParseMsgpack(MSG("\xd1\xff\x00"))->integer, -256);
  EXPECT_EQ(ParseMsgpack(MSG("\xd3\xff\xff\xff\xff\xff\xff\xff\xfe"))->integer,
            -2);
  EXPECT_TRUE(
      ParseMsgpack(MSG("\xcf\xff\xff\xff\xff\xff\xff\xff\xff"))
          ->unsigned_overflow);
}

TEST(MsgpackReaderTest, TruncatedTrailingAndExtAreDataLoss) {
  EXPECT_EQ(ParseMsgpack(MSG("\x92\x01")).status().ToString(),
            "DATA_LOSS: msgpack: truncated array or map at byte 1");
  EXPECT_EQ(ParseMsgpack(MSG("\x01\x02")).status().ToString(),
            "DATA_LOSS: msgpack: trailing bytes at byte 1");
  EXPECT_EQ(ParseMsgpack(MSG("\xd4\x01\x00")).status().ToString(),
            "DATA_LOSS: msgpack: unsupported type byte 0xd4 at byte 0");
  // A count far above the bytes left is refused before any allocation.
  EXPECT_EQ(ParseMsgpack(MSG("\xdd\xff\xff\xff\xff")).status().ToString(),
            "DATA_LOSS: msgpack: truncated array or map at byte 5");
  EXPECT_EQ(ParseMsgpack(std::string(100, '\x91')).status().ToString(),
            "DATA_LOSS: msgpack: nested too deeply at byte 33");
}

}  // namespace
}  // namespace stoker::dataset
