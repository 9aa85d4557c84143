// The byte ranges of a staging copy's part files, shared by the copy and the
// records read by range.
#include "server/dataset/part_files.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::dataset {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(RangeSetTest, AddMergesOverlappingAndTouchingRuns) {
  RangeSet set;
  set.Add(10, 20);
  set.Add(30, 40);
  set.Add(20, 25);  // Touches [10, 20).
  set.Add(5, 5);    // Empty.
  EXPECT_THAT(set.runs(), ElementsAre(Pair(10, 25), Pair(30, 40)));
  set.Add(24, 31);  // Bridges both.
  EXPECT_THAT(set.runs(), ElementsAre(Pair(10, 40)));
  set.Add(0, 100);
  EXPECT_THAT(set.runs(), ElementsAre(Pair(0, 100)));
  EXPECT_EQ(set.bytes(), 100u);
}

TEST(RangeSetTest, Contains) {
  RangeSet set;
  set.Add(10, 20);
  set.Add(30, 40);
  EXPECT_TRUE(set.Contains(10, 20));
  EXPECT_TRUE(set.Contains(12, 13));
  EXPECT_TRUE(set.Contains(7, 7));
  EXPECT_FALSE(set.Contains(9, 11));
  EXPECT_FALSE(set.Contains(15, 31));
  EXPECT_FALSE(set.Contains(40, 41));
  EXPECT_FALSE(RangeSet().Contains(0, 1));
}

TEST(RangeSetTest, MissingListsTheGaps) {
  RangeSet set;
  EXPECT_THAT(set.Missing(0, 100, 0), ElementsAre(Pair(0, 100)));
  set.Add(10, 20);
  set.Add(30, 40);
  EXPECT_THAT(set.Missing(0, 100, 0),
              ElementsAre(Pair(0, 10), Pair(20, 30), Pair(40, 100)));
  EXPECT_THAT(set.Missing(15, 35, 0), ElementsAre(Pair(20, 30)));
  EXPECT_THAT(set.Missing(12, 18, 0), ElementsAre());
  EXPECT_THAT(set.Missing(40, 50, 0), ElementsAre(Pair(40, 50)));
}

TEST(RangeSetTest, MissingMergesGapsSplitByShortPresentRuns) {
  RangeSet set;
  // A nearly covered chunk: records present everywhere but small holes.
  for (uint64_t at = 0; at < 1000; at += 10) set.Add(at, at + 9);
  // Without merging: one request per hole.
  EXPECT_EQ(set.Missing(0, 1000, 0).size(), 100u);
  // Present runs of 9 bytes are shorter than 10: one request.
  EXPECT_THAT(set.Missing(0, 1000, 10), ElementsAre(Pair(9, 1000)));
  // A long present run still splits.
  set.Add(100, 900);
  EXPECT_THAT(set.Missing(0, 1000, 10),
              ElementsAre(Pair(9, 100), Pair(909, 1000)));
}

TEST(RangeSetTest, BytesCountsTheSetInsideARange) {
  RangeSet set;
  set.Add(10, 20);
  set.Add(30, 40);
  EXPECT_EQ(set.bytes(0, 100), 20u);
  EXPECT_EQ(set.bytes(15, 35), 10u);
  EXPECT_EQ(set.bytes(12, 18), 6u);
  EXPECT_EQ(set.bytes(20, 30), 0u);
  EXPECT_EQ(set.bytes(40, 50), 0u);
  EXPECT_EQ(RangeSet().bytes(0, 10), 0u);
}

class PartFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tmp_.path() + "/shard.part";
    std::ofstream(path_) << std::string(100, '\0');
  }
  testing::ScopedTempDir tmp_;
  std::string path_;
};

TEST_F(PartFilesTest, WriteMarksPresentAndReadServesIt) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  EXPECT_FALSE(parts.Read("s", 10, 5).has_value());
  EXPECT_TRUE(parts.Write("s", 10, "hello"));
  EXPECT_EQ(parts.Read("s", 10, 5), "hello");
  EXPECT_EQ(parts.Read("s", 11, 3), "ell");
  EXPECT_FALSE(parts.Read("s", 9, 5).has_value());
  EXPECT_THAT(parts.Missing("s", 0, 20, 0),
              ElementsAre(Pair(0, 10), Pair(15, 20)));
  // The bytes are in the file at their offset.
  parts.Close("s");
  std::string text;
  ASSERT_TRUE(ReadFileToString(path_, &text).ok());
  EXPECT_EQ(text.substr(10, 5), "hello");
}

TEST_F(PartFilesTest, MarkPresentIsWhatTheCopyWrote) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f << "copied";
  }
  EXPECT_FALSE(parts.Read("s", 40, 6).has_value());
  parts.MarkPresent("s", 40, 6);
  EXPECT_EQ(parts.Read("s", 40, 6), "copied");
}

TEST_F(PartFilesTest, OpenKeepsTheRangesAResumedPartFileHolds) {
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f << "resumed";
  }
  RangeSet present;
  present.Add(20, 27);
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_, present).ok());
  EXPECT_EQ(parts.Read("s", 20, 7), "resumed");
  EXPECT_THAT(parts.Missing("s", 0, 40, 0),
              ElementsAre(Pair(0, 20), Pair(27, 40)));
}

TEST_F(PartFilesTest, NothingIsSharedForAFileNotOpenOrClosed) {
  PartFiles parts;
  EXPECT_FALSE(parts.Write("s", 0, "x"));
  EXPECT_THAT(parts.Missing("s", 5, 10, 0), ElementsAre(Pair(5, 15)));
  ASSERT_TRUE(parts.Open("s", path_).ok());
  ASSERT_TRUE(parts.Write("s", 0, "abc"));
  parts.Close("s");
  EXPECT_FALSE(parts.Read("s", 0, 3).has_value());
  EXPECT_FALSE(parts.Write("s", 50, "late"));
  EXPECT_THAT(parts.Missing("s", 0, 3, 0), ElementsAre(Pair(0, 3)));
  // Opened again (a new part file): nothing present.
  ASSERT_TRUE(parts.Open("s", path_).ok());
  EXPECT_FALSE(parts.Read("s", 0, 3).has_value());
  parts.CloseAll();
  EXPECT_FALSE(parts.Write("s", 0, "x"));
}

TEST_F(PartFilesTest, ReadWaitsForAClaimInFlight) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  ASSERT_TRUE(parts.Write("s", 0, "ab"));
  // The copy claims what is missing of [0, 50).
  const std::vector<RangeSet::Range> claim = parts.Claim("s", 0, 50, 0);
  EXPECT_THAT(claim, ElementsAre(Pair(2, 50)));
  EXPECT_EQ(parts.Read("s", 0, 2), "ab");  // Present: no wait.
  std::optional<std::string> got;
  std::thread reader([&] { got = parts.Read("s", 10, 3); });
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f << "xyz";
  }
  parts.Release("s", claim, /*written=*/true);
  reader.join();
  EXPECT_EQ(got, "xyz");
  // A claim released unwritten: the read returns nothing (it goes to the
  // source).
  const std::vector<RangeSet::Range> second = parts.Claim("s", 60, 10, 0);
  std::thread other([&] { got = parts.Read("s", 62, 2); });
  parts.Release("s", second, /*written=*/false);
  other.join();
  EXPECT_FALSE(got.has_value());
}

// Whether a Read or Claim of "s" waits in `parts` within 10 s.
bool AwaitWaiting(const PartFiles& parts) {
  return testing::WaitFor([&] { return parts.Waiting("s") > 0; },
                          std::chrono::seconds(10));
}

TEST_F(PartFilesTest, AWaitingReadGetsBytesPresentWhenTheCopyCloses) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  const std::vector<RangeSet::Range> claim = parts.Claim("s", 0, 50, 0);
  std::optional<std::string> got;
  std::thread reader([&] { got = parts.Read("s", 10, 3); });
  EXPECT_TRUE(AwaitWaiting(parts));
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f << "xyz";
  }
  // The copy's piece is written and the copy closes the file at once,
  // before the waiting read runs again: the read still gets the bytes
  // (else it would fetch them from the source).
  parts.MarkPresent("s", 0, 50);
  parts.Close("s");
  reader.join();
  EXPECT_EQ(got, "xyz");
  EXPECT_EQ(parts.Waiting("s"), 0);
}

TEST_F(PartFilesTest, CloseEndsAWaitForBytesNeverWritten) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  const std::vector<RangeSet::Range> claim = parts.Claim("s", 0, 50, 0);
  std::optional<std::string> got = "unset";
  std::thread reader([&] { got = parts.Read("s", 10, 3); });
  EXPECT_TRUE(AwaitWaiting(parts));
  parts.CloseAll();  // The copy stops with its claim unreleased.
  reader.join();
  EXPECT_FALSE(got.has_value());
}

TEST_F(PartFilesTest, TheCopysClaimWaitsForAReadsBlockInFlight) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  const std::vector<RangeSet::Range> block = parts.ClaimFree("s", 0, 50).value();
  ASSERT_THAT(block, ElementsAre(Pair(0, 50)));
  std::vector<RangeSet::Range> copy;
  std::thread copier([&] { copy = parts.Claim("s", 0, 100, 0); });
  EXPECT_TRUE(AwaitWaiting(parts));
  // The read writes what its GET brought, then releases its block: the
  // copy claims only the rest.
  ASSERT_TRUE(parts.Write("s", 0, std::string(50, 'b')));
  parts.Release("s", block, /*written=*/false);
  copier.join();
  EXPECT_THAT(copy, ElementsAre(Pair(50, 100)));
  parts.Release("s", copy, /*written=*/false);
  // A read's block that brought nothing leaves its bytes to the copy.
  const std::vector<RangeSet::Range> failed =
      parts.ClaimFree("s", 50, 50).value();
  std::thread second([&] { copy = parts.Claim("s", 0, 100, 0); });
  EXPECT_TRUE(AwaitWaiting(parts));
  parts.Release("s", failed, /*written=*/false);
  second.join();
  EXPECT_THAT(copy, ElementsAre(Pair(50, 100)));
  parts.Release("s", copy, /*written=*/false);
}

TEST_F(PartFilesTest, ReadDoesNotWaitForAClaimLargerThanItsBound) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  const std::vector<RangeSet::Range> claim = parts.Claim("s", 0, 80, 0);
  ASSERT_THAT(claim, ElementsAre(Pair(0, 80)));
  // 80 claimed bytes: a read that would wait for at most 79 returns at once.
  EXPECT_FALSE(parts.Read("s", 10, 3, /*wait_for=*/79).has_value());
  parts.Release("s", claim, /*written=*/false);
}

TEST_F(PartFilesTest, ClaimFreeLeavesOutWhatIsPresentOrClaimed) {
  PartFiles parts;
  EXPECT_FALSE(parts.ClaimFree("s", 0, 10).has_value());  // Not open.
  ASSERT_TRUE(parts.Open("s", path_).ok());
  ASSERT_TRUE(parts.Write("s", 10, "0123456789"));  // [10, 20) present.
  const std::vector<RangeSet::Range> copy = parts.Claim("s", 30, 10, 0);
  ASSERT_THAT(copy, ElementsAre(Pair(30, 40)));
  const std::optional<std::vector<RangeSet::Range>> mine =
      parts.ClaimFree("s", 0, 50);
  ASSERT_TRUE(mine.has_value());
  EXPECT_THAT(*mine, ElementsAre(Pair(0, 10), Pair(20, 30), Pair(40, 50)));
  // Claimed now: a second reader gets nothing of them.
  EXPECT_THAT(parts.ClaimFree("s", 0, 50).value(), ::testing::IsEmpty());
  parts.Release("s", *mine, /*written=*/false);
  parts.Release("s", copy, /*written=*/false);
  EXPECT_THAT(parts.ClaimFree("s", 0, 50).value(),
              ElementsAre(Pair(0, 10), Pair(20, 50)));
}

TEST_F(PartFilesTest, ManyWritersAndReaders) {
  PartFiles parts;
  ASSERT_TRUE(parts.Open("s", path_).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&parts, t] {
      for (int i = t; i < 100; i += 4) {
        const std::string byte(1, static_cast<char>('a' + i % 26));
        EXPECT_TRUE(parts.Write("s", i, byte));
        EXPECT_EQ(parts.Read("s", i, 1), byte);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(parts.Missing("s", 0, 100, 0), ElementsAre());
}

}  // namespace
}  // namespace stoker::dataset
