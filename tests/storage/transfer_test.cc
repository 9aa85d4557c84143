#include "server/storage/transfer.h"

#include <filesystem>

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
