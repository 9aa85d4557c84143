// Jobs, admission and limits, end to end: ranks of one job, refusals that
// name the field or bound, waiting for memory budget, per-peer limits.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/consume.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;
using testing::Consume;
using testing::Consumed;
using testing::TestServer;
using testing::TestServerOptions;
using Clock = std::chrono::steady_clock;

StreamOptions Options(uint32_t batch_size, uint64_t epochs = 1) {
  return testing::TestStream("val", batch_size, /*seed=*/11, epochs);
}

std::unique_ptr<TestServer> Start(TestServerOptions options) {
  auto server = TestServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// Runs the world_size ranks of `job` at once and returns what each got.
std::vector<Consumed> RunRanks(const std::string& target, StreamOptions o,
                               uint32_t world_size) {
  std::vector<Consumed> out(world_size);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      StreamOptions mine = o;
      mine.rank = r;
      mine.world_size = world_size;
      out[r] = Consume(target, mine);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(JobsTest, FourRanksOfOneJobCoverAnEpochExactlyOnce) {
  TestServerOptions so;
  so.num_samples = 103;  // Not a multiple of 4 ranks x 5.
  auto server = Start(so);
  ASSERT_NE(server, nullptr);
  for (bool drop_last : {false, true}) {
    SCOPED_TRACE(drop_last ? "drop_last" : "no drop_last");
    StreamOptions o = Options(5);
    o.job_id = drop_last ? "ddp-drop" : "ddp-keep";
    o.drop_last = drop_last;
    std::vector<Consumed> ranks = RunRanks(server->target(), o, 4);
    std::map<uint64_t, int> seen;
    for (const Consumed& c : ranks) {
      EXPECT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
      for (uint64_t id : c.ids) seen[id] += 1;
    }
    for (const auto& [id, count] : seen) {
      EXPECT_EQ(count, 1) << "sample " << id << " delivered " << count << "x";
    }
    // drop_last leaves out the tail that cannot fill a step of 4 x 5.
    EXPECT_EQ(seen.size(), drop_last ? 100u : 103u);
    if (drop_last) {
      for (const Consumed& c : ranks) EXPECT_EQ(c.batches.size(), 5u);
    }
  }
}

TEST(JobsTest, AStreamThatDisagreesWithItsJobIsRefusedNamingTheField) {
  auto server = Start(TestServerOptions{});
  ASSERT_NE(server, nullptr);
  auto client = Client::Connect(server->target());
  StreamOptions first = Options(8, /*epochs=*/0);
  first.job_id = "job-m";
  first.world_size = 2;
  auto open = client->OpenStream(first);
  ASSERT_TRUE(open.ok()) << open.status();

  struct Case {
    const char* field;
    std::function<void(StreamOptions&)> change;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"batch_size", [](StreamOptions& o) { o.batch_size = 4; },
       "batch_size 8 (fixed by the job's first stream); this stream asks "
       "for 4"},
      {"world_size", [](StreamOptions& o) { o.world_size = 4; },
       "world_size 2"},
      {"seed", [](StreamOptions& o) { o.seed = 12; }, "seed 11"},
      {"pipeline", [](StreamOptions& o) { o.pipeline = "train"; },
       "pipeline 'val'"},
      {"drop_last", [](StreamOptions& o) { o.drop_last = true; },
       "drop_last false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    StreamOptions o = first;
    o.rank = 1;
    c.change(o);
    Consumed refused = Consume(server->target(), o, 1);
    EXPECT_TRUE(absl::IsFailedPrecondition(refused.status)) << refused.status;
    EXPECT_THAT(std::string(refused.status.message()),
                HasSubstr(absl::StrCat("job 'job-m': ", c.says)));
  }
  // The agreeing rank is admitted.
  StreamOptions other = first;
  other.rank = 1;
  other.epochs = 1;
  Consumed ok = Consume(server->target(), other);
  EXPECT_TRUE(absl::IsOutOfRange(ok.status)) << ok.status;
}

TEST(JobsTest, ARankHasOneStreamAndReconnectsOnceTheOldOneEnds) {
  auto server = Start(TestServerOptions{});
  ASSERT_NE(server, nullptr);
  auto client = Client::Connect(server->target());
  StreamOptions o = Options(8, /*epochs=*/0);
  o.job_id = "job-r";
  o.world_size = 2;
  auto first = client->OpenStream(o);
  ASSERT_TRUE(first.ok()) << first.status();
  Batch batch;
  ASSERT_TRUE((*first)->Next(&batch).ok());

  StreamOptions again = o;
  again.open_timeout = std::chrono::milliseconds(300);
  Consumed refused = Consume(server->target(), again, 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status)) << refused.status;
  EXPECT_THAT(std::string(refused.status.message()),
              HasSubstr("rank 0 of 2 already has an open stream"));

  // A rank that reconnects while its old stream is ending waits for it.
  again.open_timeout = std::chrono::seconds(10);
  again.start = Position{0, 1};
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    first->reset();
  });
  Consumed resumed = Consume(server->target(), again, 2);
  closer.join();
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_EQ(resumed.positions.front(), std::make_pair(uint64_t{0}, uint64_t{1}));
}

TEST(BudgetTest, AnOpenWaitsForBudgetAndGetsInWhenItFrees) {
  TestServerOptions so;
  so.memory_budget = "16MiB";
  auto server = Start(so);
  ASSERT_NE(server, nullptr);
  // train: float32 3x32x32 = 12 KiB a sample; 256 x 4 batches = 12 MiB.
  StreamOptions o = Options(256, /*epochs=*/0);
  o.pipeline = "train";
  o.prefetch = 4;
  auto client = Client::Connect(server->target());
  auto first = client->OpenStream(o);
  ASSERT_TRUE(first.ok()) << first.status();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    first->reset();
  });
  const Clock::time_point asked = Clock::now();
  Consumed second = Consume(server->target(), o, 1);
  const auto waited = Clock::now() - asked;
  closer.join();
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.batches.size(), 1u);
  EXPECT_GE(waited, std::chrono::milliseconds(350));
}

TEST(BudgetTest, BytesInFlightStayWithinTheBudgetUnderABurstOfStreams) {
  TestServerOptions so;
  so.memory_budget = "8MiB";
  auto server = Start(so);
  ASSERT_NE(server, nullptr);
  // 64 x 12 KiB x 4 = 3 MiB a stream: two fit, sixteen arrive at once.
  constexpr int kStreams = 16;
  std::vector<Consumed> got(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      StreamOptions o = Options(64);
      o.pipeline = "train";
      o.prefetch = 4;
      o.seed = i;
      o.open_timeout = std::chrono::seconds(60);
      got[i] = Consume(server->target(), o);
    });
  }
  for (auto& t : threads) t.join();
  for (const Consumed& c : got) {
    EXPECT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
    EXPECT_EQ(c.ids.size(), 50u);
  }
  auto stats = server->server()->stream_service()->GetStats();
  EXPECT_LE(stats.bytes_high_water, 8u << 20);
  EXPECT_GE(stats.bytes_high_water, 2 * 3u * (64 * 12288)) << "two at once";
  // The daemon lets a stream's memory go once its RPC is done, a moment
  // after the client has seen the end.
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(5);
  while (stats.bytes_reserved != 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = server->server()->stream_service()->GetStats();
  }
  EXPECT_EQ(stats.bytes_reserved, 0u);
}

TEST(LimitsTest, APeerIsItsUidAndMayHoldOnlyItsStreams) {
  TestServerOptions so;
  so.max_streams_per_peer = 2;
  auto server = Start(so);
  ASSERT_NE(server, nullptr);
  auto client = Client::Connect(server->target());
  StreamOptions o = Options(8, /*epochs=*/0);
  auto a = client->OpenStream(o);
  auto b = client->OpenStream(o);
  ASSERT_TRUE(a.ok() && b.ok());
  Consumed third = Consume(server->target(), o, 1);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status)) << third.status;
  EXPECT_THAT(std::string(third.status.message()),
              HasSubstr(absl::StrCat("peer uid:", getuid(),
                                     " has 2 streams open, the bound "
                                     "max_streams_per_peer=2")));
  a->reset();
  // Once the daemon has seen the first stream end, the peer may open again.
  service::StreamService* svc = server->server()->stream_service();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (svc->GetStats().open_streams > 1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  StreamOptions one = Options(8);
  Consumed now = Consume(server->target(), one);
  EXPECT_TRUE(absl::IsOutOfRange(now.status)) << now.status;
}

TEST(LimitsTest, ABatchOverMaxBatchBytesIsRefusedNamingTheBound) {
  TestServerOptions so;
  so.max_batch_bytes = "1MiB";
  auto server = Start(so);
  ASSERT_NE(server, nullptr);
  StreamOptions o = Options(256);
  o.pipeline = "train";  // 256 x 12 KiB = 3 MiB.
  Consumed refused = Consume(server->target(), o, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status)) << refused.status;
  EXPECT_THAT(std::string(refused.status.message()),
              HasSubstr("a batch of 256 is 3.0 MiB, over the bound "
                        "max_batch_bytes=1.0 MiB"));
  o.batch_size = 64;
  Consumed ok = Consume(server->target(), o, 1);
  EXPECT_TRUE(ok.status.ok()) << ok.status;
}

}  // namespace
}  // namespace stoker
