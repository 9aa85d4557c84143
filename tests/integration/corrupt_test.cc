// A record corrupted on disk: reported as DataLoss, the rest still served.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;
using testing::ScopedTempDir;
using testing::TestServer;
using testing::TestServerOptions;

class CorruptTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CorruptTest, CorruptRecordIsReportedAndTheRestServed) {
  ScopedTempDir data;
  auto dir = testing::MakeTestDataset(data.path(), 40, 2, 2, /*seed=*/3);
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(testing::CorruptRecordOnDisk(*dir, 5).ok());
  TestServerOptions options;
  options.dataset_dir = *dir;
  options.on_corrupt = GetParam();
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  auto client = Client::Connect((*server)->target());
  StreamOptions o;
  o.dataset = "train";
  o.pipeline = "train";
  o.batch_size = 40;  // One batch holds the whole epoch.
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Batch batch;
  absl::Status s = (*stream)->Next(&batch);
  if (GetParam() == "skip") {
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(batch.sample_ids().size(), 39u);
    EXPECT_THAT(batch.skipped_ids(), ::testing::ElementsAre(5));
    EXPECT_EQ(batch.Find("image")->shape[0], 39);
    EXPECT_TRUE(absl::IsOutOfRange((*stream)->Next(&batch)));
  } else {
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("dataset 'train'"));
    EXPECT_THAT(s.message(), HasSubstr("shard-00000.lmdb, key 5"));
  }
  // The daemon keeps serving after either outcome.
  auto again = client->ListDatasets();
  EXPECT_TRUE(again.ok()) << again.status();
}

INSTANTIATE_TEST_SUITE_P(OnCorrupt, CorruptTest,
                         ::testing::Values("skip", "fail"));

}  // namespace
}  // namespace stoker
