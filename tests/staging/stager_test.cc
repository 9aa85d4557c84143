#include "server/staging/stager.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "server/storage/transfer.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::staging {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Text(const std::string& path) {
  std::string out;
  EXPECT_TRUE(dataset::ReadFileToString(path, &out).ok()) << path;
  return out;
}

// Servable once the manifest and every record index are local, as a
// policy that reads missing records by range would be; records what it
// was told.
class IndexesPolicy : public ServePolicy {
 public:
  bool Servable(const StageView& view) override {
    return view.indexes_local();
  }
  absl::StatusOr<std::shared_ptr<const dataset::Dataset>> Open(
      const StageView& view) override {
    absl::MutexLock lock(&mu);
    opened_with = view.published.size();
    opened_complete = view.complete;
    // A real policy returns a dataset that reads by range; here the shard
    // files are not there yet, so hand over nothing that reads.
    return std::shared_ptr<const dataset::Dataset>();
  }
  void OnPublished(const StageView&, const std::string& file) override {
    absl::MutexLock lock(&mu);
    later.push_back(file);
  }
  absl::Mutex mu;
  size_t opened_with = 0;
  bool opened_complete = true;
  std::vector<std::string> later;
};

class StagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 12, 3, 3, 21);
    ASSERT_TRUE(dir.ok()) << dir.status();
    src_ = *dir;
    dest_ = tmp_.path() + "/staged";
  }

  Stager::Options Base() {
    Stager::Options o;
    o.name = "train";
    o.path = dest_;
    o.source = src_;
    o.chunk_bytes = 4096;
    o.parallel = 1;
    return o;
  }

  testing::ScopedTempDir tmp_;
  std::string src_, dest_;
};

TEST_F(StagerTest, StagesTheSourceAndHandsOverTheCompleteCopyOnce) {
  std::vector<std::shared_ptr<const dataset::Dataset>> served;
  Stager::Options o = Base();
  o.on_servable = [&](std::shared_ptr<const dataset::Dataset> ds) {
    served.push_back(std::move(ds));
  };
  absl::StatusOr<std::unique_ptr<Stager>> stager = Stager::Create(std::move(o));
  ASSERT_TRUE(stager.ok()) << stager.status();
  (*stager)->Start();
  ASSERT_TRUE((*stager)->WaitServable(absl::Seconds(60)));
  ASSERT_TRUE((*stager)->WaitDone(absl::Seconds(60)));
  const StageStatus s = (*stager)->status();
  EXPECT_EQ(s.state, StageStatus::State::kComplete) << s.error;
  EXPECT_EQ(s.bytes_done, s.bytes_total);
  EXPECT_EQ(s.bytes_moved, s.bytes_total);
  EXPECT_EQ(s.shards_done, 3u);
  EXPECT_EQ(s.files_done, 6u);
  ASSERT_EQ(served.size(), 1u);
  ASSERT_NE(served[0], nullptr);
  EXPECT_EQ(served[0]->name(), "train");
  EXPECT_EQ(served[0]->num_samples(), 12u);
  EXPECT_EQ(Text(dest_ + "/manifest.json"), Text(src_ + "/manifest.json"));
  for (const char* f : {"shard-00000.lmdb", "shard-00002.idx"}) {
    EXPECT_EQ(Text(dest_ + "/" + f), Text(src_ + "/" + f)) << f;
  }
}

TEST_F(StagerTest, APolicyMayServeOnceTheIndexesAreLocal) {
  auto policy = std::make_unique<IndexesPolicy>();
  IndexesPolicy* const seen = policy.get();
  int servable_calls = 0;
  Stager::Options o = Base();
  o.policy = std::move(policy);
  o.on_servable = [&](std::shared_ptr<const dataset::Dataset>) {
    ++servable_calls;
  };
  absl::StatusOr<std::unique_ptr<Stager>> stager = Stager::Create(std::move(o));
  ASSERT_TRUE(stager.ok()) << stager.status();
  (*stager)->Start();
  ASSERT_TRUE((*stager)->WaitDone(absl::Seconds(60)));
  EXPECT_EQ((*stager)->status().state, StageStatus::State::kComplete);
  EXPECT_EQ(servable_calls, 1);
  absl::MutexLock lock(&seen->mu);
  EXPECT_EQ(seen->opened_with, 3u);  // The three indexes, no shard.
  EXPECT_FALSE(seen->opened_complete);
  EXPECT_THAT(seen->later,
              ::testing::ElementsAre("shard-00000.lmdb", "shard-00001.lmdb",
                                     "shard-00002.lmdb"));
}

TEST_F(StagerTest, RefusesADiskWithoutRoomNamingTheSizes) {
  Stager::Options o = Base();
  o.free_bytes = [](const std::string&) -> absl::StatusOr<uint64_t> {
    return 1000;
  };
  absl::StatusOr<std::unique_ptr<Stager>> stager = Stager::Create(std::move(o));
  ASSERT_TRUE(stager.ok()) << stager.status();
  (*stager)->Start();
  EXPECT_FALSE((*stager)->WaitServable(absl::Seconds(60)));
  const StageStatus s = (*stager)->status();
  EXPECT_EQ(s.state, StageStatus::State::kFailed);
  EXPECT_TRUE(absl::IsResourceExhausted(s.error)) << s.error;
  EXPECT_THAT(s.error.message(), HasSubstr("dataset 'train'"));
  EXPECT_THAT(s.error.message(),
              HasSubstr(absl::StrCat(s.bytes_total, " bytes) more")));
  EXPECT_THAT(s.error.message(), HasSubstr("(1000 bytes) free"));
  EXPECT_FALSE(fs::exists(dest_ + "/shard-00000.idx"));
}

TEST_F(StagerTest, TheCacheLimitHookMayRefuse) {
  Stager::Options o = Base();
  uint64_t asked = 0;
  o.reserve = [&](uint64_t bytes) {
    asked = bytes;
    return absl::ResourceExhaustedError("over storage.cache_limit");
  };
  absl::StatusOr<std::unique_ptr<Stager>> stager = Stager::Create(std::move(o));
  ASSERT_TRUE(stager.ok());
  (*stager)->Start();
  ASSERT_TRUE((*stager)->WaitDone(absl::Seconds(60)));
  const StageStatus s = (*stager)->status();
  EXPECT_EQ(asked, s.bytes_total);
  EXPECT_THAT(s.error.message(), HasSubstr("over storage.cache_limit"));
}

TEST_F(StagerTest, WaitsForAnotherProcessHoldingThePathThenUsesItsCopy) {
  // What another daemon staging the same path holds: the pull lock.
  fs::create_directories(dest_ + "/" + storage::kPullStateDir);
  const std::string lock_path =
      dest_ + "/" + storage::kPullStateDir + "/lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(::pwrite(fd, "4242", 4, 0), 4);
  Stager::Options o = Base();
  o.lock_poll = absl::Milliseconds(10);
  absl::StatusOr<std::unique_ptr<Stager>> stager = Stager::Create(std::move(o));
  ASSERT_TRUE(stager.ok());
  (*stager)->Start();
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return (*stager)->status().state == StageStatus::State::kWaiting;
      },
      std::chrono::seconds(60)));
  EXPECT_FALSE(fs::exists(dest_ + "/shard-00000.idx"));
  ::close(fd);  // The other process is done (here: gone).
  ASSERT_TRUE((*stager)->WaitServable(absl::Seconds(60)));
  EXPECT_EQ((*stager)->status().state, StageStatus::State::kComplete);
}

TEST_F(StagerTest, ServesACompleteLocalCopyWhenTheSourceIsGone) {
  {
    absl::StatusOr<std::unique_ptr<Stager>> first = Stager::Create(Base());
    ASSERT_TRUE(first.ok());
    (*first)->Start();
    ASSERT_TRUE((*first)->WaitDone(absl::Seconds(60)));
  }
  fs::remove_all(src_);
  int servable_calls = 0;
  Stager::Options o = Base();
  o.on_servable = [&](std::shared_ptr<const dataset::Dataset>) {
    ++servable_calls;
  };
  absl::StatusOr<std::unique_ptr<Stager>> again = Stager::Create(std::move(o));
  ASSERT_TRUE(again.ok());
  (*again)->Start();
  ASSERT_TRUE((*again)->WaitServable(absl::Seconds(60)));
  EXPECT_EQ(servable_calls, 1);
  EXPECT_EQ((*again)->status().bytes_moved, 0u);
}

TEST_F(StagerTest, ASourceThatIsNotALocationIsRefusedAtCreate) {
  Stager::Options o = Base();
  o.source = "ftp://host/x";
  absl::Status s = Stager::Create(std::move(o)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("dataset 'train': source:"));
}

}  // namespace
}  // namespace stoker::staging
