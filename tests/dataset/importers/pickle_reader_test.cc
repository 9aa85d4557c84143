#include "server/dataset/importers/pickle_reader.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

// What CPython 3.11 writes for these values (pickle.dumps(v, protocol=P)).
std::string Bytes(const char* s, size_t n) { return std::string(s, n); }
#define PICKLE(s) Bytes(s, sizeof(s) - 1)

// (b'ab', 7), protocol 4: FRAME, SHORT_BINBYTES, MEMOIZE, BININT1, TUPLE2.
const std::string kP4 = PICKLE(
    "\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00\x43\x02\x61\x62\x94\x4b\x07"
    "\x86\x94\x2e");
// (b'\xffab', -1), protocol 2: bytes as _codecs.encode(u'\xffab', 'latin1').
const std::string kP2 = PICKLE(
    "\x80\x02\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a"
    "\x71\x00\x58\x04\x00\x00\x00\xc3\xbf\x61\x62\x71\x01\x58\x06\x00\x00\x00"
    "\x6c\x61\x74\x69\x6e\x31\x71\x02\x86\x71\x03\x52\x71\x04\x4a\xff\xff\xff"
    "\xff\x86\x71\x05\x2e");
// (b'ab', 2**40), protocol 5: LONG1.
const std::string kP5 = PICKLE(
    "\x80\x05\x95\x10\x00\x00\x00\x00\x00\x00\x00\x43\x02\x61\x62\x94\x8a\x06"
    "\x00\x00\x00\x00\x00\x01\x86\x94\x2e");
// [b'0', b'1'], protocol 4: EMPTY_LIST, MARK, APPENDS.
const std::string kKeys = PICKLE(
    "\x80\x04\x95\x0d\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x43\x01\x30\x94"
    "\x43\x01\x31\x94\x65\x2e");
// An object whose __reduce__ returns (os.system, ('true',)).
const std::string kEvil4 = PICKLE(
    "\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00\x8c\x05\x70\x6f\x73\x69\x78"
    "\x94\x8c\x06\x73\x79\x73\x74\x65\x6d\x94\x93\x94\x8c\x04\x74\x72\x75\x65"
    "\x94\x85\x94\x52\x94\x2e");
const std::string kEvil2 = PICKLE(
    "\x80\x02\x63\x70\x6f\x73\x69\x78\x0a\x73\x79\x73\x74\x65\x6d\x0a\x71\x00"
    "\x58\x04\x00\x00\x00\x74\x72\x75\x65\x71\x01\x85\x71\x02\x52\x71\x03\x2e");
const std::string kEvil0 = PICKLE(
    "\x63\x70\x6f\x73\x69\x78\x0a\x73\x79\x73\x74\x65\x6d\x0a\x70\x30\x0a\x28"
    "\x56\x74\x72\x75\x65\x0a\x70\x31\x0a\x74\x70\x32\x0a\x52\x70\x33\x0a\x2e");

// "(b'ab', 7)" for a tuple of bytes and int, for readable expectations.
std::string Show(const PyValue& v) {
  switch (v.type) {
    case PyValue::Type::kInt:
      return std::to_string(v.integer);
    case PyValue::Type::kBytes:
      return "b'" + v.bytes + "'";
    case PyValue::Type::kTuple:
    case PyValue::Type::kList: {
      std::string s = v.type == PyValue::Type::kTuple ? "(" : "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        s += (i ? ", " : "") + Show(v.items[i]);
      }
      return s + (v.type == PyValue::Type::kTuple ? ")" : "]");
    }
    default:
      return "?";
  }
}

TEST(PickleReaderTest, ReadsTheRecordsEachProtocolWrites) {
  EXPECT_EQ(Show(*ParsePickle(kP4)), "(b'ab', 7)");
  EXPECT_EQ(Show(*ParsePickle(kP5)), "(b'ab', 1099511627776)");
  EXPECT_EQ(Show(*ParsePickle(kKeys)), "[b'0', b'1']");
  absl::StatusOr<PyValue> p2 = ParsePickle(kP2);
  ASSERT_TRUE(p2.ok()) << p2.status();
  EXPECT_EQ(Show(*p2), "(b'\xff" "ab', -1)");
}

TEST(PickleReaderTest, RefusesEveryPickleThatWouldCallSomething) {
  EXPECT_EQ(ParsePickle(kEvil4).status().ToString(),
            "DATA_LOSS: pickle: opcode STACK_GLOBAL is refused (it imports a "
            "name; the reader takes only plain bytes, ints, tuples and "
            "lists, and runs nothing) at byte 28");
  EXPECT_EQ(ParsePickle(kEvil2).status().ToString(),
            "DATA_LOSS: pickle: opcode GLOBAL is refused (it imports a name; "
            "the reader takes only plain bytes, ints, tuples and lists, and "
            "runs nothing) at byte 2");
  EXPECT_EQ(ParsePickle(kEvil0).status().code(), absl::StatusCode::kDataLoss);
  // _codecs.encode with other arguments is not bytes either.
  std::string other = kP2;
  other.replace(other.find("latin1"), 6, "utf_8\x00", 6);
  EXPECT_FALSE(ParsePickle(other).ok());
}

TEST(PickleReaderTest, TruncatedOrTrailingInputIsDataLoss) {
  EXPECT_EQ(ParsePickle(kP4.substr(0, 14)).status().ToString(),
            "DATA_LOSS: pickle: truncated at byte 11");
  EXPECT_EQ(ParsePickle(kP4 + "x").status().ToString(),
            "DATA_LOSS: pickle: bytes after STOP at byte 20");
  EXPECT_EQ(ParsePickle("").status().ToString(),
            "DATA_LOSS: pickle: no STOP at byte 0");
}

// PROTO 4, N, then `depth` TUPLE1s (or EMPTY_LIST, value, APPEND pairs),
// STOP: a value nested `depth` deep.
std::string Nested(int depth, bool lists) {
  std::string p = "\x80\x04";
  if (lists) {
    for (int i = 0; i < depth; ++i) p += "]";
    p += "N";
    for (int i = 0; i < depth; ++i) p += "a";
  } else {
    p += "N";
    p.append(depth, '\x85');
  }
  return p + ".";
}

TEST(PickleReaderTest, RefusesNestingDeeperThanTheBound) {
  EXPECT_TRUE(ParsePickle(Nested(100, false)).ok());
  EXPECT_TRUE(ParsePickle(Nested(100, true)).ok());
  EXPECT_EQ(ParsePickle(Nested(101, false)).status().ToString(),
            "DATA_LOSS: pickle: tuples and lists nested more than 100 deep "
            "at byte 103");
  EXPECT_FALSE(ParsePickle(Nested(101, true)).ok());
  // 400,000 nested tuples once overflowed the stack when freed.
  EXPECT_EQ(ParsePickle(Nested(400000, false)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParsePickle(Nested(400000, true)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(PickleReaderTest, AMemoGetKeepsTheDepthOfWhatItCopies) {
  // A 60-deep tuple, memoized, then put in a tuple with its own copy and
  // again: the copies carry the depth, so the bound still holds.
  std::string p = "\x80\x04N";
  p.append(60, '\x85');
  p += "\x94";  // MEMOIZE as 0.
  const std::string get_pair("h\x00\x86", 3);  // BINGET 0, TUPLE2.
  for (int i = 0; i < 40; ++i) p += get_pair;
  EXPECT_TRUE(ParsePickle(p + ".").ok());  // 100 deep.
  EXPECT_EQ(ParsePickle(p + get_pair + ".").status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace stoker::dataset
