#include "server/config/yaml_util.h"

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::config::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(DiagnosticsTest, ShowsMarksOneBased) {
  Diagnostics diag("a.yaml");
  YAML::Mark mark;
  mark.line = 2;
  mark.column = 4;
  diag.Error(mark, "bad; expected good");
  EXPECT_EQ(diag.ToStatus().message(), "a.yaml:3:5: bad; expected good");
  EXPECT_EQ(diag.ToStatus().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DiagnosticsTest, ShowsNullMarkAsFirstLine) {
  Diagnostics diag("a.yaml");
  diag.Error(YAML::Mark::null_mark(), "empty");
  EXPECT_EQ(diag.ToStatus().message(), "a.yaml:1:1: empty");
}

TEST(DiagnosticsTest, ListsEveryErrorOnItsOwnLine) {
  Diagnostics diag("a.yaml");
  EXPECT_TRUE(diag.ok());
  diag.Error(YAML::Mark::null_mark(), "one");
  diag.Error(YAML::Mark::null_mark(), "two");
  EXPECT_FALSE(diag.ok());
  EXPECT_EQ(diag.error_count(), 2u);
  EXPECT_EQ(diag.ToStatus().message(), "a.yaml:1:1: one\na.yaml:1:1: two");
}

TEST(DiagnosticsTest, CountsButDoesNotListErrorsPastTheCap) {
  Diagnostics diag("a.yaml");
  for (int i = 0; i < 25; ++i) diag.Error(YAML::Mark::null_mark(), "x");
  EXPECT_EQ(diag.error_count(), 25u);
  EXPECT_THAT(diag.ToStatus().message(), HasSubstr("5 more errors not shown"));
}

TEST(ReadMapTest, ReportsDuplicateKeysWithTheFirstLine) {
  Diagnostics diag("a.yaml");
  const YAML::Node map = YAML::Load("a: 1\nb: 2\na: 3\n");
  const std::vector<MapEntry> entries = ReadMap(map, "limits", diag);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].key, "a");
  EXPECT_EQ(entries[0].value.Scalar(), "1");
  EXPECT_EQ(diag.ToStatus().message(),
            "a.yaml:3:1: duplicate key 'a' in limits (first at line 1); "
            "expected each key once");
}

TEST(ReadMapTest, ReportsUnknownKeysAndSuggestsTheClosest) {
  Diagnostics diag("a.yaml");
  const YAML::Node map = YAML::Load("max_prefetch: 1\nmax_prefech: 2\n");
  const std::vector<MapEntry> entries =
      ReadMap(map, "limits", {"max_prefetch", "max_streams"}, diag);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(diag.ToStatus().message(),
            "a.yaml:2:1: unknown key 'max_prefech' in limits (did you mean "
            "'max_prefetch'?); expected one of: max_prefetch, max_streams");
}

TEST(ReadMapTest, EmptyAllowedListAdmitsNoKey) {
  Diagnostics diag("a.yaml");
  const YAML::Node map = YAML::Load("{x: 1}");
  EXPECT_THAT(ReadMap(map, "", std::vector<std::string>{}, diag), IsEmpty());
  EXPECT_EQ(diag.ToStatus().message(),
            "a.yaml:1:2: unknown key 'x'; expected no keys");
}

TEST(ReadMapTest, PointsAtTheKeyForAnEmptyValue) {
  Diagnostics diag("a.yaml");
  const YAML::Node map = YAML::Load("a:\nb: 1\n");
  const std::vector<MapEntry> entries = ReadMap(map, "", diag);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].value_mark.line, 0);
  EXPECT_EQ(entries[1].value_mark.line, 1);
  EXPECT_EQ(entries[1].value_mark.column, 3);
}

TEST(DescribeTest, NamesTheKindOfNode) {
  EXPECT_EQ(Describe(YAML::Load("[1]")), "a list");
  EXPECT_EQ(Describe(YAML::Load("{a: 1}")), "a map");
  EXPECT_EQ(Describe(YAML::Load("~")), "nothing");
  EXPECT_EQ(Describe(YAML::Load("lots")), "'lots'");
  EXPECT_EQ(Describe(YAML::Load(std::string(50, 'x'))),
            "'" + std::string(40, 'x') + "...'");
}

TEST(ScalarParsersTest, ReadOnlyTheExactForm) {
  EXPECT_EQ(ParseBool("Yes"), true);
  EXPECT_EQ(ParseBool("off"), false);
  EXPECT_EQ(ParseBool("1"), std::nullopt);
  EXPECT_EQ(ParseInt("-42"), -42);
  EXPECT_EQ(ParseInt("4.0"), std::nullopt);
  EXPECT_EQ(ParseInt(" 4"), std::nullopt);
  EXPECT_EQ(ParseInt("99999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseNumber("3"), 3.0);
  EXPECT_EQ(ParseNumber("0.25"), 0.25);
  EXPECT_EQ(ParseNumber("1e-3"), 1e-3);
  EXPECT_EQ(ParseNumber("nan"), std::nullopt);
  EXPECT_EQ(ParseNumber("inf"), std::nullopt);
  EXPECT_EQ(ParseNumber("abc"), std::nullopt);
}

TEST(EditDistanceTest, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("szie", "size"), 1u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("workrs", "workers"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(ClosestMatchTest, SuggestsOnlyLikelyTypos) {
  const std::vector<std::string> keys = {"workers", "memory_budget", "limits"};
  EXPECT_EQ(ClosestMatch("workrs", keys), "workers");
  EXPECT_EQ(ClosestMatch("memory_bugdet", keys), "memory_budget");
  EXPECT_EQ(ClosestMatch("color", keys), std::nullopt);
  EXPECT_EQ(ClosestMatch("x", keys), std::nullopt);
}

TEST(UnknownNameMessageTest, SortsTheKnownNames) {
  EXPECT_EQ(UnknownNameMessage("op", "crop", "pipeline 'a'", {"b", "a"}),
            "unknown op 'crop' in pipeline 'a'; expected one of: a, b");
}

}  // namespace
}  // namespace stoker::config::internal
