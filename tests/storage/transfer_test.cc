#include "server/storage/transfer.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "server/dataset/verifier.h"
#include "tests/storage/counting_store.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 9, 3, 3, 11);
    ASSERT_TRUE(dir.ok()) << dir.status();
    src_ = *dir;
  }

  testing::ScopedTempDir tmp_;
  std::string src_;
};

TEST_F(TransferTest, PullCopiesAndPublishesTheManifestLast) {
  const std::string dest = tmp_.path() + "/dest";
  std::vector<TransferProgress> seen;
  TransferOptions o;
  o.chunk_bytes = 4096;
  o.progress = [&](const TransferProgress& p) { seen.push_back(p); };
  std::unique_ptr<Store> src = Local(src_);
  absl::StatusOr<TransferReport> r = Pull(*src, dest, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->files_moved, 6u);
  EXPECT_FALSE(fs::exists(dest + "/" + kPullStateDir));
  const dataset::VerifyReport v =
      dataset::Verify(dest, nullptr, nullptr).value();
  EXPECT_TRUE(v.errors.empty());
  EXPECT_EQ(v.records, 9u);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().files_done, 6u);
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
}

TEST_F(TransferTest, PullKeepsPublishedFilesOfAnInterruptedPull) {
  const std::string dest = tmp_.path() + "/dest";
  // What a pull killed after publishing the first shard leaves.
  fs::create_directories(dest + "/" + kPullStateDir);
  fs::copy_file(src_ + "/manifest.json",
                dest + "/" + kPullStateDir + "/manifest.json");
  fs::copy_file(src_ + "/shard-00000.lmdb", dest + "/shard-00000.lmdb");
  std::vector<std::string> notices;
  TransferOptions o;
  o.notice = [&](const std::string& n) { notices.push_back(n); };
  std::unique_ptr<Store> src = Local(src_);
  absl::StatusOr<TransferReport> r = Pull(*src, dest, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->files_reused, 1u);
  EXPECT_EQ(r->files_moved, 5u);
  EXPECT_THAT(notices, ::testing::ElementsAre(
                           HasSubstr("resuming: 1 of 6 files are already in")));
}

TEST_F(TransferTest, PullRefusesADestHoldingAnotherDataset) {
  absl::StatusOr<std::string> other =
      testing::MakeTestDataset(tmp_.path(), 6, 2, 1, 12);
  ASSERT_TRUE(other.ok());
  std::unique_ptr<Store> src = Local(src_);
  absl::Status s = Pull(*src, *other, {}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("holds another dataset"));
}

TEST_F(TransferTest, PullTellsTheManifestThenIndexesBeforeShards) {
  const std::string dest = tmp_.path() + "/dest";
  std::vector<std::string> events;
  TransferOptions o;
  o.parallel = 1;
  o.on_manifest = [&](const dataset::Manifest& m, const std::string& text) {
    events.push_back(absl::StrCat("manifest ", m.shards.size(), " ",
                                  text.empty() ? "empty" : "text"));
  };
  o.reserve = [&](uint64_t bytes) {
    events.push_back(bytes > 0 ? "reserve" : "reserve 0");
    return absl::OkStatus();
  };
  o.on_published = [&](const std::string& f) { events.push_back(f); };
  std::unique_ptr<Store> src = Local(src_);
  ASSERT_TRUE(Pull(*src, dest, o).ok());
  EXPECT_THAT(events,
              ::testing::ElementsAre("manifest 3 text", "reserve",
                                     "shard-00000.idx", "shard-00001.idx",
                                     "shard-00002.idx", "shard-00000.lmdb",
                                     "shard-00001.lmdb", "shard-00002.lmdb"));
  // A pull of a complete DEST tells every file again.
  events.clear();
  ASSERT_TRUE(Pull(*src, dest, o).ok());
  EXPECT_EQ(events.size(), 7u);
}

TEST_F(TransferTest, PullStopsWhenReserveRefusesAndWhenCancelled) {
  const std::string dest = tmp_.path() + "/dest";
  TransferOptions o;
  o.reserve = [](uint64_t bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("no room for ", bytes));
  };
  std::unique_ptr<Store> src = Local(src_);
  absl::Status s = Pull(*src, dest, o).status();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_FALSE(fs::exists(dest + "/shard-00000.idx"));
  o.reserve = nullptr;
  o.cancelled = [] { return true; };
  s = Pull(*src, dest, o).status();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_FALSE(fs::exists(dest + "/manifest.json"));
  o.cancelled = nullptr;
  ASSERT_TRUE(Pull(*src, dest, o).ok());
}

// What a ranged read writes into a part file while the copy runs: the
// bytes [begin, end) of the source's `file`, `flip` changing one of them.
void WriteRange(dataset::PartFiles& parts, const std::string& src,
                const std::string& file, uint64_t begin, uint64_t end,
                bool flip = false) {
  std::string text;
  ASSERT_TRUE(dataset::ReadFileToString(src + "/" + file, &text).ok());
  std::string bytes = text.substr(begin, end - begin);
  if (flip) bytes[bytes.size() / 2] ^= 0x5a;
  ASSERT_TRUE(parts.Write(file, begin, bytes));
}

TEST_F(TransferTest, PullFetchesOnlyTheRangesNotWrittenByRangedReads) {
  const std::string dest = tmp_.path() + "/dest";
  const std::string shard = "shard-00001.lmdb";
  const uint64_t size = fs::file_size(src_ + "/" + shard);
  ASSERT_GE(size, 3 * 4096u);
  auto parts = std::make_shared<dataset::PartFiles>();
  TransferOptions o;
  o.parallel = 1;
  o.chunk_bytes = 4096;
  o.min_kept_bytes = 0;
  o.parts = parts;
  std::vector<TransferProgress> seen;
  o.progress = [&](const TransferProgress& p) { seen.push_back(p); };
  // Once the indexes are in, the shards' part files exist: ranged reads
  // write 1000 bytes in the first chunk and the whole second one.
  o.on_published = [&](const std::string& f) {
    if (f != "shard-00002.idx") return;
    WriteRange(*parts, src_, shard, 100, 1100);
    WriteRange(*parts, src_, shard, 4096, 8192);
  };
  CountingStore src(Local(src_));
  absl::StatusOr<TransferReport> r = Pull(src, dest, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(src.bytes(shard), size - 1000 - 4096);
  // [0, 100) and [1100, 4096), then the chunks after the second.
  EXPECT_EQ(src.requests(shard), 2 + (size - 8192 + 4095) / 4096);
  // The other shards, untouched, are fetched whole.
  EXPECT_EQ(src.bytes("shard-00000.lmdb"),
            fs::file_size(src_ + "/shard-00000.lmdb"));
  EXPECT_TRUE(dataset::Verify(dest, nullptr, nullptr).value().errors.empty());
  std::string a, b;
  ASSERT_TRUE(dataset::ReadFileToString(src_ + "/" + shard, &a).ok());
  ASSERT_TRUE(dataset::ReadFileToString(dest + "/" + shard, &b).ok());
  EXPECT_EQ(a, b);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_EQ(seen.back().bytes_moved + 1000 + 4096, seen.back().bytes_total);
  // Once the pull returned, nothing is written into its files any more.
  EXPECT_FALSE(parts->Write(shard, 0, "x"));
}

TEST_F(TransferTest, PullMergesHolesSplitByShortWrittenRuns) {
  const std::string dest = tmp_.path() + "/dest";
  const std::string shard = "shard-00001.lmdb";
  const uint64_t size = fs::file_size(src_ + "/" + shard);
  auto parts = std::make_shared<dataset::PartFiles>();
  TransferOptions o;
  o.parallel = 1;
  o.chunk_bytes = size;  // One chunk.
  o.min_kept_bytes = 64;
  o.parts = parts;
  // Records every 100 bytes, 50 of them written: holes split by 50-byte
  // runs, which is less than min_kept_bytes.
  o.on_published = [&](const std::string& f) {
    if (f != "shard-00002.idx") return;
    for (uint64_t at = 0; at + 50 <= size; at += 100) {
      WriteRange(*parts, src_, shard, at, at + 50);
    }
  };
  CountingStore src(Local(src_));
  ASSERT_TRUE(Pull(src, dest, o).ok());
  EXPECT_EQ(src.requests(shard), 1u);
  EXPECT_LT(src.bytes(shard), size);
  EXPECT_TRUE(dataset::Verify(dest, nullptr, nullptr).value().errors.empty());
}

TEST_F(TransferTest, PullFetchesAShardAgainWhenAWrittenRangeIsBad) {
  const std::string dest = tmp_.path() + "/dest";
  const std::string shard = "shard-00001.lmdb";
  const uint64_t size = fs::file_size(src_ + "/" + shard);
  auto parts = std::make_shared<dataset::PartFiles>();
  TransferOptions o;
  o.parallel = 1;
  o.chunk_bytes = 4096;
  o.min_kept_bytes = 0;
  o.parts = parts;
  std::vector<std::string> notices;
  o.notice = [&](const std::string& n) { notices.push_back(n); };
  o.on_published = [&](const std::string& f) {
    if (f == "shard-00002.idx") {
      WriteRange(*parts, src_, shard, 4096, 8192, /*flip=*/true);
    }
  };
  CountingStore src(Local(src_));
  ASSERT_TRUE(Pull(src, dest, o).ok());
  EXPECT_THAT(notices, ::testing::ElementsAre(HasSubstr("fetching it again")));
  EXPECT_EQ(src.bytes(shard), size - 4096 + size);
  std::string a, b;
  ASSERT_TRUE(dataset::ReadFileToString(src_ + "/" + shard, &a).ok());
  ASSERT_TRUE(dataset::ReadFileToString(dest + "/" + shard, &b).ok());
  EXPECT_EQ(a, b);
}

TEST_F(TransferTest, PullWithoutPartFilesFetchesEveryChunkWhole) {
  const std::string dest = tmp_.path() + "/dest";
  TransferOptions o;
  o.chunk_bytes = 4096;
  CountingStore src(Local(src_));
  ASSERT_TRUE(Pull(src, dest, o).ok());
  for (const char* f : {"shard-00000.lmdb", "shard-00001.lmdb"}) {
    const uint64_t size = fs::file_size(src_ + "/" + f);
    EXPECT_EQ(src.bytes(f), size);
    EXPECT_EQ(src.requests(f), (size + 4095) / 4096);
  }
}

TEST_F(TransferTest, PushRefusesAnotherDatasetUnlessForced) {
  absl::StatusOr<std::string> other =
      testing::MakeTestDataset(tmp_.path(), 6, 2, 1, 13);
  ASSERT_TRUE(other.ok());
  std::unique_ptr<Store> dest = Local(*other);
  EXPECT_THAT(Push(src_, *dest, {}).status().message(),
              HasSubstr("holds another dataset; pass --force"));
  TransferOptions force;
  force.force = true;
  ASSERT_TRUE(Push(src_, *dest, force).ok());
  std::string a, b;
  ASSERT_TRUE(dataset::ReadFileToString(src_ + "/manifest.json", &a).ok());
  ASSERT_TRUE(dataset::ReadFileToString(*other + "/manifest.json", &b).ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace stoker::storage
