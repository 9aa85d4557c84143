// A pull cut in the middle of a shard, run again: it keeps the ranges of the
// part file its journal names and fetches only the rest.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "server/dataset/verifier.h"
#include "server/storage/part_journal.h"
#include "server/storage/transfer.h"
#include "tests/storage/counting_store.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kChunk = 4096;
constexpr char kShard[] = "shard-00001.lmdb";

std::string Text(const std::string& path) {
  std::string text;
  EXPECT_TRUE(dataset::ReadFileToString(path, &text).ok()) << path;
  return text;
}

class PullResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 9, 3, 3, 11);
    ASSERT_TRUE(dir.ok()) << dir.status();
    src_ = *dir;
    dest_ = tmp_.path() + "/dest";
    size_ = fs::file_size(src_ + "/" + kShard);
    ASSERT_GE(size_, 3 * kChunk);
  }

  TransferOptions Options() {
    TransferOptions o;
    o.parallel = 1;
    o.chunk_bytes = kChunk;
    o.notice = [this](const std::string& n) { notices_.push_back(n); };
    return o;
  }

  // A pull cut two and a half chunks into shard 1, as a kill -9 mid-chunk
  // leaves it: shard 0 published, two chunks of shard 1 written and
  // journaled, half of the third written and not.
  void CutPull() {
    CountingStore src(Local(src_));
    src.CutAfter(kShard, 2 * kChunk + kChunk / 2);
    absl::Status s = Pull(src, dest_, Options()).status();
    ASSERT_TRUE(absl::IsUnavailable(s)) << s;
    ASSERT_TRUE(fs::exists(dest_ + "/shard-00000.lmdb"));
    ASSERT_FALSE(fs::exists(dest_ + "/" + kShard));
    ASSERT_FALSE(fs::exists(dest_ + "/manifest.json"));
    notices_.clear();
  }

  std::string Part() const {
    return dest_ + "/" + kPullStateDir + "/" + kShard + ".part";
  }
  std::string Journal() const { return PartJournal::PathOf(Part()); }

  void ExpectTheSourceBytes() {
    for (const char* f : {"shard-00000.lmdb", "shard-00001.lmdb",
                          "shard-00002.lmdb", "manifest.json"}) {
      EXPECT_EQ(Text(src_ + "/" + f), Text(dest_ + "/" + f)) << f;
    }
    EXPECT_TRUE(
        dataset::Verify(dest_, nullptr, nullptr).value().errors.empty());
    EXPECT_FALSE(fs::exists(dest_ + "/" + kPullStateDir));
  }

  testing::ScopedTempDir tmp_;
  std::string src_;
  std::string dest_;
  uint64_t size_ = 0;
  std::vector<std::string> notices_;
};

TEST_F(PullResumeTest, ARerunFetchesOnlyTheBytesNotJournaled) {
  CutPull();
  CountingStore src(Local(src_));
  std::vector<TransferProgress> seen;
  TransferOptions o = Options();
  o.progress = [&](const TransferProgress& p) { seen.push_back(p); };
  absl::StatusOr<TransferReport> r = Pull(src, dest_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // The two journaled chunks are kept; the half chunk is fetched again.
  EXPECT_EQ(src.bytes(kShard), size_ - 2 * kChunk);
  EXPECT_EQ(src.requests(kShard), (size_ - 2 * kChunk + kChunk - 1) / kChunk);
  EXPECT_EQ(src.bytes("shard-00000.lmdb"), 0u);
  EXPECT_EQ(r->bytes_resumed, 2 * kChunk);
  const uint64_t third = fs::file_size(src_ + "/shard-00002.lmdb");
  EXPECT_EQ(r->bytes_moved, size_ - 2 * kChunk + third);
  EXPECT_THAT(notices_,
              ElementsAre(HasSubstr("1 part file keeps 0.0 MiB (8192 bytes) "
                                    "written before")));
  // Resumed bytes are done but not moved: the rate counts only what
  // crossed the link.
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().bytes_done - seen.front().bytes_moved,
            seen.back().bytes_total - size_ - third + 2 * kChunk);
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_EQ(seen.back().bytes_moved, r->bytes_moved);
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, ARerunSharesTheResumedRangesWithRangedReads) {
  CutPull();
  const std::string want = Text(src_ + "/" + kShard).substr(0, 2 * kChunk);
  auto parts = std::make_shared<dataset::PartFiles>();
  CountingStore src(Local(src_));
  TransferOptions o = Options();
  o.parts = parts;
  o.min_kept_bytes = 0;
  // While the copy runs, a ranged read of the kept bytes is served from
  // the part file.
  bool read = false;
  o.progress = [&](const TransferProgress&) {
    if (read) return;
    read = true;
    // (Read would wait for the piece this very call is fetching, were the
    // bytes not present.)
    ASSERT_THAT(parts->Missing(kShard, 0, 2 * kChunk, 0), IsEmpty());
    EXPECT_EQ(parts->Read(kShard, 0, 2 * kChunk), want);
  };
  ASSERT_TRUE(Pull(src, dest_, o).ok());
  EXPECT_TRUE(read);
  EXPECT_EQ(src.bytes(kShard), size_ - 2 * kChunk);
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, ATornJournalIsDiscarded) {
  CutPull();
  // A kill in the middle of an append leaves half a line.
  std::ofstream(Journal(), std::ios::app) << "12288 16";
  CountingStore src(Local(src_));
  absl::StatusOr<TransferReport> r = Pull(src, dest_, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(src.bytes(kShard), size_);
  EXPECT_EQ(r->bytes_resumed, 0u);
  EXPECT_THAT(notices_, ElementsAre(HasSubstr("torn"),
                                    HasSubstr("resuming: 4 of 6 files")));
  EXPECT_THAT(notices_[0], HasSubstr("fetching shard-00001.lmdb from its "
                                     "start"));
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, AJournalOfAnotherVersionOfTheShardIsDiscarded) {
  CutPull();
  // Another pack where the state says this pull's manifest is: its shard
  // 1 is another file, and the journal beside the part file is not its.
  testing::ScopedTempDir other_tmp;
  absl::StatusOr<std::string> other =
      testing::MakeTestDataset(other_tmp.path(), 9, 3, 3, 12);
  ASSERT_TRUE(other.ok()) << other.status();
  fs::copy_file(*other + "/manifest.json",
                dest_ + "/" + kPullStateDir + "/manifest.json",
                fs::copy_options::overwrite_existing);
  for (const auto& e : fs::directory_iterator(dest_)) {
    if (e.is_regular_file()) fs::remove(e.path());  // Its files only.
  }
  src_ = *other;
  size_ = fs::file_size(src_ + "/" + kShard);
  CountingStore src(Local(src_));
  absl::StatusOr<TransferReport> r = Pull(src, dest_, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(src.bytes(kShard), size_);
  EXPECT_EQ(r->bytes_resumed, 0u);
  // Shard 2's part file was created by the cut pull too.
  EXPECT_THAT(notices_,
              ElementsAre(HasSubstr("shard-00001.lmdb.part.ranges: written "
                                    "for another version"),
                          HasSubstr("shard-00002.lmdb.part.ranges: written "
                                    "for another version")));
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, ASourceThatChangedStartsOver) {
  CutPull();
  testing::ScopedTempDir other_tmp;
  absl::StatusOr<std::string> other =
      testing::MakeTestDataset(other_tmp.path(), 9, 3, 3, 12);
  ASSERT_TRUE(other.ok()) << other.status();
  src_ = *other;
  size_ = fs::file_size(src_ + "/" + kShard);
  CountingStore src(Local(src_));
  absl::StatusOr<TransferReport> r = Pull(src, dest_, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(src.bytes(kShard), size_);
  EXPECT_EQ(r->bytes_resumed, 0u);
  EXPECT_THAT(notices_, ElementsAre(HasSubstr("changed since the interrupted "
                                              "pull")));
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, ABadResumedRangeFailsTheDigestAndTheShardIsRefetched) {
  CutPull();
  {
    std::fstream f(Part(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  CountingStore src(Local(src_));
  ASSERT_TRUE(Pull(src, dest_, Options()).ok());
  EXPECT_EQ(src.bytes(kShard), size_ - 2 * kChunk + size_);
  EXPECT_THAT(notices_, ElementsAre(HasSubstr("resuming:"),
                                    HasSubstr("fetching it again")));
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, APartFileOfTheWrongSizeIsFetchedAnew) {
  CutPull();
  fs::resize_file(Part(), size_ - 1);
  CountingStore src(Local(src_));
  ASSERT_TRUE(Pull(src, dest_, Options()).ok());
  EXPECT_EQ(src.bytes(kShard), size_);
  EXPECT_THAT(notices_[0], HasSubstr("bytes, not"));
  ExpectTheSourceBytes();
}

TEST_F(PullResumeTest, APublishedShardLeavesNoJournal) {
  CountingStore src(Local(src_));
  ASSERT_TRUE(Pull(src, dest_, Options()).ok());
  EXPECT_THAT(notices_, IsEmpty());
  ExpectTheSourceBytes();
}

}  // namespace
}  // namespace stoker::storage
