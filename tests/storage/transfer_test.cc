#include "server/storage/transfer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "server/dataset/verifier.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::unique_ptr<Store> Local(const std::string& dir) {
  return OpenStore(ParseLocation(dir).value(), {}).value();
}

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
              ::testing::ElementsAre(
                  "manifest 3 text", "reserve", "shard-00000.idx",
                  "shard-00001.idx", "shard-00002.idx", "shard-00000.lmdb",
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
