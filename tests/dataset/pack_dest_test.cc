// The housekeeping around a pack's destination (pack_dest.h): a temporary
// folder is removed only when it is provably a gone pack's own, and a
// missing parent folder is named.
#include "server/dataset/pack_dest.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The pid of a child that has exited and been reaped: no process has it
// (until the kernel hands it out again, which takes a full wrap).
int GonePid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(PackDestTest, RemovesOnlyTheMarkedFolderOfAGonePack) {
  testing::ScopedTempDir tmp;
  const std::string dst = tmp.path() + "/ds";
  const std::string packs = dst + ".tmp-" + std::to_string(GonePid());
  const std::string users = dst + ".tmp-" + std::to_string(GonePid());
  ASSERT_TRUE(testing::WriteTestFile(packs + "/" + kPackTempMarker, "").ok());
  ASSERT_TRUE(testing::WriteTestFile(packs + "/shard-00000.lmdb", "x").ok());
  ASSERT_TRUE(testing::WriteTestFile(users + "/photos.txt", "mine").ok());

  EXPECT_THAT(RemoveStaleTempDirs(dst),
              ElementsAre(HasSubstr("removed " + packs + ", left by pack")));
  EXPECT_FALSE(fs::exists(packs));
  EXPECT_TRUE(fs::exists(users + "/photos.txt"));
}

TEST(PackDestTest, ATempDirHoldsItsMarkerUntilRemoved) {
  testing::ScopedTempDir tmp;
  const std::string dst = tmp.path() + "/ds";
  absl::StatusOr<std::unique_ptr<PackTempDir>> temp = PackTempDir::Create(dst);
  ASSERT_TRUE(temp.ok()) << temp.status();
  const std::string path = (*temp)->path();
  EXPECT_TRUE(fs::is_regular_file(path + "/" + kPackTempMarker));
  EXPECT_TRUE((*temp)->RemoveMarker().ok());
  EXPECT_TRUE(fs::is_empty(path));
  temp->reset();
  EXPECT_FALSE(fs::exists(path));
}

TEST(PackDestTest, CreateRefusesAnUnmarkedFolderOfItsName) {
  testing::ScopedTempDir tmp;
  const std::string dst = tmp.path() + "/ds";
  const std::string ours = dst + ".tmp-" + std::to_string(::getpid());
  ASSERT_TRUE(testing::WriteTestFile(ours + "/photos.txt", "mine").ok());
  const absl::Status s = PackTempDir::Create(dst).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is not a pack's temporary folder"));
  EXPECT_TRUE(fs::exists(ours + "/photos.txt"));

  // A marked one is a pack's, left by an earlier process with this pid.
  fs::remove(ours + "/photos.txt");
  ASSERT_TRUE(testing::WriteTestFile(ours + "/" + kPackTempMarker, "").ok());
  ASSERT_TRUE(testing::WriteTestFile(ours + "/shard-00000.lmdb", "x").ok());
  absl::StatusOr<std::unique_ptr<PackTempDir>> temp = PackTempDir::Create(dst);
  ASSERT_TRUE(temp.ok()) << temp.status();
  EXPECT_FALSE(fs::exists(ours + "/shard-00000.lmdb"));
}

TEST(PackDestTest, AMissingParentIsNamed) {
  testing::ScopedTempDir tmp;
  const std::string dst = tmp.path() + "/absent/ds";
  EXPECT_EQ(CheckDestParent(dst).message(),
            "cannot pack into " + dst + ": its parent folder " + tmp.path() +
                "/absent does not exist; create it first (mkdir -p " +
                tmp.path() + "/absent)");
  EXPECT_EQ(PackTempDir::Create(dst).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(testing::WriteTestFile(tmp.path() + "/file", "x").ok());
  EXPECT_EQ(CheckDestParent(tmp.path() + "/file/ds").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckDestParent("relative-ds").ok());
}

}  // namespace
}  // namespace stoker::dataset
