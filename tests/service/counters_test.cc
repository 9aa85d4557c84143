// The service's counters after a scripted stream: what the metrics read.
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

TEST(ServiceCountersTest, CountsOutliveTheStreamAndCoverEveryStage) {
  auto server = testing::TestServer::Start(testing::TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect((*server)->target());
  StreamOptions o;
  o.dataset = "train";
  o.pipeline = "train";
  o.batch_size = 8;
  o.job_id = "j1";
  {
    auto stream = client->OpenStream(o);
    ASSERT_TRUE(stream.ok()) << stream.status();
    Batch batch;
    while ((*stream)->Next(&batch).ok()) {
    }
  }
  o.dataset = "missing";
  EXPECT_FALSE(client->OpenStream(o).ok());

  service::StreamService* svc = (*server)->server()->stream_service();
  auto counters = svc->Counters();
  ASSERT_EQ(counters.size(), 1u);  // An unknown dataset counts nothing.
  const auto& [key, c] = counters[0];
  EXPECT_EQ(key.dataset, "train");
  EXPECT_EQ(key.job, "j1");
  EXPECT_EQ(key.transport, "grpc");
  EXPECT_EQ(c->samples.load(), 50);
  EXPECT_EQ(c->batches.load(), 7);
  EXPECT_EQ(c->skipped.load(), 0);
  EXPECT_EQ(c->acks.load(), 7);
  for (int s = 0; s < service::kNumStages; ++s) {
    const auto latency = c->latency[s].Read();
    const uint64_t expected =
        static_cast<service::Stage>(s) == service::Stage::kTransfer ? 7 : 50;
    EXPECT_EQ(latency.count, expected)
        << service::StageName(static_cast<service::Stage>(s));
  }
  EXPECT_EQ(svc->Errors()[static_cast<int>(absl::StatusCode::kNotFound)], 1);
}

}  // namespace
}  // namespace stoker
