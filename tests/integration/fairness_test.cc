// Fair sharing of the worker pool between jobs, measured on a live daemon:
// equal weights give equal rates, 2:1 weights about 2:1, and a consumer
// that stops holds no worker. These compare rates, so the tests run alone
// (SERIAL in CMake); the rates compared are measured over the same window.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using testing::TestServer;
using testing::TestServerOptions;

StreamOptions Endless(const std::string& job, double weight) {
  StreamOptions o;
  o.dataset = "train";
  o.pipeline = "costly";
  o.batch_size = 16;
  o.seed = 5;
  o.epochs = 0;
  o.job_id = job;
  o.weight = weight;
  // Deep enough that each job always has tasks queued: the pool, not the
  // round trips, sets the rates.
  o.prefetch = 16;
  return o;
}

// Consumes a stream on its own thread, as fast as it can, until stopped.
class Consumer {
 public:
  Consumer(Client* client, const StreamOptions& options) {
    auto stream = client->OpenStream(options);
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return;
    stream_ = *std::move(stream);
    thread_ = std::thread([this] {
      Batch batch;
      while (!stop_ && stream_->Next(&batch).ok()) {
      }
    });
  }
  ~Consumer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::unique_ptr<Stream> stream_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Samples delivered so far, by job id.
std::map<std::string, int64_t> SamplesByJob(TestServer& server) {
  std::map<std::string, int64_t> out;
  for (const auto& s : server.server()->stream_service()->Snapshot()) {
    out[s.spec.job_id] += s.stats.counts[service::Count::kSamples];
  }
  return out;
}

// Samples per second of each job over `window`, after a warm-up.
std::map<std::string, double> Rates(TestServer& server,
                                    std::chrono::milliseconds window) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto before = SamplesByJob(server);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const auto after = SamplesByJob(server);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::map<std::string, double> rates;
  for (const auto& [job, n] : after) {
    const auto it = before.find(job);
    rates[job] = (n - (it == before.end() ? 0 : it->second)) / seconds;
  }
  return rates;
}

// ASan slows the pool and the transport unevenly: the normal build measures
// the rates.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() \
  GTEST_SKIP() << "rate comparisons are not meaningful under ASan"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif

std::unique_ptr<TestServer> Start() {
  TestServerOptions so;
  so.num_samples = 64;
  // A millisecond or so of work a sample and small outputs, so that the
  // pool is what limits the rates, not the consumers and the transport,
  // which share this process and the machine's cores with it: with the
  // test server's cheap `train` pipeline (27,000 samples/s) the 2:1 ratio
  // came out between 1.4 and 2 depending on how the threads were scheduled.
  so.extra_yaml =
      "  costly:\n"
      "    - decode_jpeg: {}\n"
      "    - resize: {size: [96, 96]}\n"
      "    - gaussian_blur: {kernel_size: 31, sigma: [4.0, 5.0]}\n"
      "    - normalize: {dtype: uint8}\n";
  auto server = TestServer::Start(so);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(FairnessTest, EqualWeightsGetRatesWithinTenPercent) {
  SKIP_UNDER_ASAN();
  auto server = Start();
  ASSERT_NE(server, nullptr);
  auto client = Client::Connect(server->target());
  Consumer a(client.get(), Endless("job-a", 1));
  Consumer b(client.get(), Endless("job-b", 1));
  auto rates = Rates(*server, std::chrono::seconds(3));
  ASSERT_GT(rates["job-a"], 0);
  ASSERT_GT(rates["job-b"], 0);
  const double ratio = rates["job-a"] / rates["job-b"];
  EXPECT_GT(ratio, 0.9) << rates["job-a"] << " vs " << rates["job-b"];
  EXPECT_LT(ratio, 1.1) << rates["job-a"] << " vs " << rates["job-b"];
}

TEST(FairnessTest, WeightsOfTwoToOneGiveAboutTwoToOne) {
  SKIP_UNDER_ASAN();
  auto server = Start();
  ASSERT_NE(server, nullptr);
  auto client = Client::Connect(server->target());
  Consumer heavy(client.get(), Endless("heavy", 2));
  Consumer light(client.get(), Endless("light", 1));
  auto rates = Rates(*server, std::chrono::seconds(3));
  ASSERT_GT(rates["light"], 0);
  const double ratio = rates["heavy"] / rates["light"];
  EXPECT_GT(ratio, 1.7) << rates["heavy"] << " vs " << rates["light"];
  EXPECT_LT(ratio, 2.3) << rates["heavy"] << " vs " << rates["light"];
}

TEST(FairnessTest, AStoppedConsumerLeavesTheOthersTheirRate) {
  SKIP_UNDER_ASAN();
  auto server = Start();
  ASSERT_NE(server, nullptr);
  auto client = Client::Connect(server->target());
  Consumer a(client.get(), Endless("job-a", 1));
  Consumer c(client.get(), Endless("job-c", 1));
  // Rounds without and with a stopped consumer, interleaved, so that a
  // drift of the machine's speed affects both sides alike.
  double without = 0, with = 0;
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    auto free_run = Rates(*server, std::chrono::milliseconds(1500));
    without += free_run["job-a"] + free_run["job-c"];
    // A consumer that reads one batch and stops: its prefetch fills, then
    // it has nothing to build and holds no worker.
    auto stalled = client->OpenStream(Endless("job-stalled", 1));
    ASSERT_TRUE(stalled.ok()) << stalled.status();
    Batch batch;
    ASSERT_TRUE((*stalled)->Next(&batch).ok());
    auto stall = Rates(*server, std::chrono::milliseconds(1500));
    with += stall["job-a"] + stall["job-c"];
    EXPECT_EQ(stall["job-stalled"], 0);
    for (const auto& s : server->server()->stream_service()->Snapshot()) {
      if (s.spec.job_id == "job-stalled") {
        EXPECT_EQ(s.stats.building, 0);
      }
    }
  }
  // What a stopped consumer must not do is asserted above (no rate, nothing
  // building); the rates are a coarse guard on top. 0.9 failed at 0.86 on
  // a shared 2-core CI machine with nothing else of ours running.
  EXPECT_GE(with, 0.8 * without)
      << without / kRounds << " samples/s without, " << with / kRounds
      << " with a stopped consumer";
}

}  // namespace
}  // namespace stoker
