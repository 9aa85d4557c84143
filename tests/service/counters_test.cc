// The service's counters after a scripted stream: what the metrics read.
#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "server/service/counters.h"
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
  using service::Count;
  const service::CountValues v = c->Read();
  EXPECT_EQ(v[Count::kSamples], 50);
  EXPECT_EQ(v[Count::kBatches], 7);
  EXPECT_EQ(v[Count::kSkipped], 0);
  EXPECT_EQ(v[Count::kAcks], 7);
  EXPECT_GT(v[Count::kBytes], 0);
  for (int s = 0; s < service::kNumStages; ++s) {
    const auto latency = c->latency[s].Read();
    const uint64_t expected =
        static_cast<service::Stage>(s) == service::Stage::kTransfer ? 7 : 50;
    EXPECT_EQ(latency.count, expected)
        << service::StageName(static_cast<service::Stage>(s));
  }
  EXPECT_EQ(svc->Errors()[static_cast<int>(absl::StatusCode::kNotFound)], 1);
}

TEST(StreamCountersTest, AStreamCountsOnceAndItsLabelSetNeverGoesBack) {
  using service::Count;
  auto set = std::make_shared<service::StreamCounters>();
  std::shared_ptr<service::Counts> a = service::StreamCounters::Join(set);
  std::shared_ptr<service::Counts> b = service::StreamCounters::Join(set);
  a->Add(Count::kSamples, 5);
  b->Add(Count::kSamples, 7);
  b->Add(Count::kWaitNs, 1'500'000'000);
  EXPECT_EQ(set->Read()[Count::kSamples], 12) << "open streams, read live";
  EXPECT_EQ(a->Read()[Count::kSamples], 5) << "a stream's own count";
  b.reset();  // Closes: its counts fold into the set.
  EXPECT_EQ(set->Read()[Count::kSamples], 12);
  EXPECT_DOUBLE_EQ(set->Read().Exported(Count::kWaitNs), 1.5);
  a->Add(Count::kSamples, 1);
  a.reset();
  EXPECT_EQ(set->Read()[Count::kSamples], 13);
}

TEST(StreamCountersTest, EachCountHasItsOwnNames) {
  std::set<std::string> names, metrics;
  for (const service::CountDef& def : service::kCounts) {
    EXPECT_TRUE(names.insert(def.name).second) << def.name;
    EXPECT_TRUE(metrics.insert(def.metric).second) << def.metric;
    EXPECT_GT(std::string(def.help).size(), 10u) << def.metric;
  }
}

}  // namespace
}  // namespace stoker
