#include "server/dataset/skip_summary.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

TEST(SkipSummaryTest, CountsEachReasonAndNamesAFewOfEach) {
  std::vector<SkippedFile> skipped = {
      {"a key 0", "pickle: truncated at byte 11"},
      {"a key 1", "not a JPEG"},
      {"a key 2", "pickle: truncated at byte 97"},
      {"a key 3", "pickle: truncated at byte 5"},
      {"a key 4", "pickle: truncated at byte 6"},
  };
  EXPECT_EQ(SummarizeSkipped(skipped, 2),
            "  4 x pickle: truncated at byte #: a key 0 (pickle: truncated "
            "at byte 11), a key 2 (pickle: truncated at byte 97), ... and 2 "
            "more\n"
            "  1 x not a JPEG: a key 1");
}

TEST(SkipSummaryTest, HexBytesCountAsNumbersButNamesDoNot) {
  std::vector<SkippedFile> skipped = {
      {"a", "not JPEG (starts 78 0A)"},
      {"b", "not JPEG (starts FF 00)"},
      {"c", "not an int32"},
      {"d", "not an int64"},
  };
  EXPECT_EQ(SummarizeSkipped(skipped),
            "  2 x not JPEG (starts # #): a (not JPEG (starts 78 0A)), b (not "
            "JPEG (starts FF 00))\n"
            "  1 x not an int32: c\n"
            "  1 x not an int64: d");
}

TEST(SkipSummaryTest, CountsTheReasonsBeyondTheLimitOnOneLine) {
  std::vector<SkippedFile> skipped = {
      {"x", "one"}, {"y", "two"}, {"z", "three"}, {"w", "three"}};
  EXPECT_EQ(SummarizeSkipped(skipped, 3, 1),
            "  2 x three: z, w\n"
            "  2 more for 2 other reasons");
  EXPECT_EQ(SummarizeSkipped({}), "");
}

}  // namespace
}  // namespace stoker::dataset
