#include "server/staging/staged_datasets.h"

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::staging {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class StagedDatasetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 12, 3, 3, 31);
    ASSERT_TRUE(dir.ok()) << dir.status();
    src_ = *dir;
    for (const auto& e : fs::directory_iterator(src_)) {
      if (e.path().filename() != "manifest.json") size_ += e.file_size();
    }
  }

  StagedDatasets::Entry Entry(const std::string& name) {
    return {name, tmp_.path() + "/" + name, src_};
  }

  std::unique_ptr<StagedDatasets> Make(uint64_t cache_limit) {
    StagingSettings s;
    s.cache_limit = cache_limit;
    s.chunk_bytes = 4096;
    // Servable once complete, so that "servable" below means "copied".
    s.policy = [](const std::string&) {
      return std::make_unique<CopyCompletePolicy>();
    };
    return std::make_unique<StagedDatasets>(
        s,
        [this](const std::string& name,
               std::shared_ptr<const dataset::Dataset>) {
          absl::MutexLock lock(&mu_);
          servable_.insert(name);
        },
        [this](const std::string& name) {
          absl::MutexLock lock(&mu_);
          evicted_.push_back(name);
          servable_.erase(name);
        },
        [this](const std::string& name) {
          absl::MutexLock lock(&mu_);
          return in_use_.count(name) != 0;
        });
  }

  bool Servable(const std::string& name) {
    return testing::WaitFor(
        [&] {
          absl::MutexLock lock(&mu_);
          return servable_.count(name) != 0;
        },
        std::chrono::seconds(60));
  }

  testing::ScopedTempDir tmp_;
  std::string src_;
  uint64_t size_ = 0;
  absl::Mutex mu_;
  std::set<std::string> servable_, in_use_;
  std::vector<std::string> evicted_;
};

TEST_F(StagedDatasetsTest, EvictsTheIdleCopyThatIsInTheWayThenStagesItAgain) {
  std::unique_ptr<StagedDatasets> staged = Make(size_ * 3 / 2);
  ASSERT_TRUE(staged->Update({Entry("a")}).ok());
  staged->Start();
  ASSERT_TRUE(Servable("a"));
  ASSERT_TRUE(staged->Update({Entry("a"), Entry("b")}).ok());
  ASSERT_TRUE(Servable("b"));
  {
    absl::MutexLock lock(&mu_);
    EXPECT_THAT(evicted_, ::testing::ElementsAre("a"));
  }
  EXPECT_FALSE(fs::exists(tmp_.path() + "/a"));
  EXPECT_EQ(staged->Servable().count("a"), 0u);
  // A stream asks for a: it is staged again, and b, idle, makes room.
  StagedDatasets::Lookup l = staged->Find("a");
  EXPECT_TRUE(l.staged && !l.servable && !l.failed);
  ASSERT_TRUE(Servable("a"));
  EXPECT_FALSE(fs::exists(tmp_.path() + "/b"));
}

TEST_F(StagedDatasetsTest, ACopyInUseIsKeptAndTheNewOneFailsWithTheSizes) {
  std::unique_ptr<StagedDatasets> staged = Make(size_ * 3 / 2);
  ASSERT_TRUE(staged->Update({Entry("a")}).ok());
  staged->Start();
  ASSERT_TRUE(Servable("a"));
  {
    absl::MutexLock lock(&mu_);
    in_use_.insert("a");
  }
  ASSERT_TRUE(staged->Update({Entry("a"), Entry("b")}).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return staged->Find("b").failed; },
                               std::chrono::seconds(60)));
  const StagedDatasets::Lookup b = staged->Find("b");
  EXPECT_TRUE(absl::IsResourceExhausted(b.error)) << b.error;
  EXPECT_THAT(b.error.message(), HasSubstr("storage.cache_limit is"));
  EXPECT_THAT(b.error.message(), HasSubstr("in use or being staged (a)"));
  EXPECT_THAT(b.error.message(),
              HasSubstr(absl::StrCat("(", size_, " bytes)")));
  EXPECT_TRUE(fs::exists(tmp_.path() + "/a/manifest.json"));
}

TEST_F(StagedDatasetsTest, AReloadKeepsAnUnchangedCopyAndStopsARemovedOne) {
  std::unique_ptr<StagedDatasets> staged = Make(0);
  ASSERT_TRUE(staged->Update({Entry("a")}).ok());
  staged->Start();
  ASSERT_TRUE(Servable("a"));
  ASSERT_TRUE(staged->Update({Entry("a")}).ok());
  EXPECT_EQ(staged->Servable().count("a"), 1u);  // Kept, not restaged.
  ASSERT_TRUE(staged->Update({}).ok());
  EXPECT_FALSE(staged->Find("a").staged);
  StagedDatasets::Entry bad = Entry("c");
  bad.source = "ftp://x/y";
  EXPECT_THAT(staged->Update({bad}).message(), HasSubstr("dataset 'c'"));
}

TEST(OverrideEnvTest, ConfigKeysOverTheAwsVariables) {
  StagingSettings s;
  s.s3_region = "eu-west-1";
  s.s3_endpoint = "http://minio:9000";
  const storage::EnvLookup env =
      OverrideEnv(s, [](const char* name) -> std::optional<std::string> {
        return std::string("env-") + name;
      });
  EXPECT_EQ(env("AWS_REGION"), "eu-west-1");
  EXPECT_EQ(env("AWS_DEFAULT_REGION"), "eu-west-1");
  EXPECT_EQ(env("AWS_ENDPOINT_URL_S3"), "http://minio:9000");
  EXPECT_EQ(env("AWS_PROFILE"), "env-AWS_PROFILE");
  EXPECT_EQ(env("AWS_SECRET_ACCESS_KEY"), "env-AWS_SECRET_ACCESS_KEY");
}

}  // namespace
}  // namespace stoker::staging
