#include "server/config/byte_size.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::config {
namespace {

using ::testing::HasSubstr;

TEST(ParseByteSizeTest, ReadsBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseByteSize("1TiB"), 1ull << 40);
  EXPECT_EQ(*ParseByteSize("15EiB"), 15ull << 60);
}

TEST(ParseByteSizeTest, ReadsDecimalUnits) {
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1500000000u);
  EXPECT_EQ(*ParseByteSize("3kB"), 3000u);
  EXPECT_EQ(*ParseByteSize("2MB"), 2000000u);
}

TEST(ParseByteSizeTest, ReadsPlainBytes) {
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(*ParseByteSize("7B"), 7u);
  EXPECT_EQ(*ParseByteSize("0"), 0u);
}

TEST(ParseByteSizeTest, AcceptsFractionsThatMakeWholeBytes) {
  EXPECT_EQ(*ParseByteSize("1.5KiB"), 1536u);
  EXPECT_EQ(*ParseByteSize("0.5GiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("2.0B"), 2u);
}

TEST(ParseByteSizeTest, IgnoresUnitCaseAndSpaceBeforeUnit) {
  EXPECT_EQ(*ParseByteSize("2 GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("2gib"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize(" 64MiB "), 64ull << 20);
}

TEST(ParseByteSizeTest, AcceptsTheLargest64BitValue) {
  EXPECT_EQ(*ParseByteSize("18446744073709551615"), UINT64_MAX);
}

TEST(ParseByteSizeTest, RejectsTextThatIsNotASize) {
  for (const char* text : {"", "lots", "GiB", "-1GiB", "1.GiB", ".5GiB", "1e9",
                           "2 G", "2G", "2GiBs", "0x10", "1,5GB"}) {
    const absl::StatusOr<uint64_t> size = ParseByteSize(text);
    ASSERT_FALSE(size.ok()) << text;
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(size.status().message(),
              absl::StrCat("expected a size like 2GiB, got '", text, "'"));
  }
}

TEST(ParseByteSizeTest, RejectsSizesAbove64Bits) {
  for (const char* text : {"16EiB", "18446744073709551616", "99999999999EB"}) {
    const absl::StatusOr<uint64_t> size = ParseByteSize(text);
    ASSERT_FALSE(size.ok()) << text;
    EXPECT_THAT(size.status().message(), HasSubstr("too large")) << text;
  }
}

TEST(ParseByteSizeTest, RejectsFractionsOfAByte) {
  for (const char* text : {"0.1KiB", "1.5", "1.5B"}) {
    const absl::StatusOr<uint64_t> size = ParseByteSize(text);
    ASSERT_FALSE(size.ok()) << text;
    EXPECT_THAT(size.status().message(), HasSubstr("not a whole number"))
        << text;
  }
}

TEST(FormatByteSizeTest, UsesTheLargestExactBinaryUnit) {
  EXPECT_EQ(FormatByteSize(0), "0B");
  EXPECT_EQ(FormatByteSize(1000), "1000B");
  EXPECT_EQ(FormatByteSize(1536), "1536B");
  EXPECT_EQ(FormatByteSize(1536 * 1024), "1536KiB");
  EXPECT_EQ(FormatByteSize(2ull << 30), "2GiB");
  EXPECT_EQ(FormatByteSize(1ull << 60), "1EiB");
}

TEST(FormatByteSizeTest, RoundTripsThroughParseByteSize) {
  for (uint64_t bytes : {uint64_t{1}, uint64_t{4096}, uint64_t{3} << 20,
                         uint64_t{5} << 40, UINT64_MAX}) {
    EXPECT_EQ(*ParseByteSize(FormatByteSize(bytes)), bytes);
  }
}

}  // namespace
}  // namespace stoker::config
