// Shared preprocessing runs, end to end: jobs that opt in with `share`
// receive the same bytes, built once; a consumer that lags is detached onto
// its own run and still gets every sample exactly once.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/consume.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::ElementsAreArray;
using testing::BatchBytes;
using testing::Consume;
using testing::Consumed;
using testing::TestServer;
using testing::TestServerOptions;

StreamOptions Options(const std::string& job, uint64_t epochs) {
  StreamOptions o;
  o.dataset = "train";
  o.pipeline = "train";
  o.batch_size = 5;
  o.seed = 3;
  o.epochs = epochs;
  o.job_id = job;
  o.share = true;
  o.prefetch = 2;
  o.open_timeout = std::chrono::seconds(10);
  return o;
}

// The file of this process's mapping that holds `p`, as /proc/self/maps
// names it (e.g. "/memfd:stoker-ring (deleted)"), or "" if none does.
std::string MappedFile(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, file;
    fields >> range >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, file);
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (addr >= lo && addr < hi) return file;
  }
  return "";
}

// Reads all of an opened stream, sleeping `step` after each batch. With
// `files`, notes which mapping each batch's first tensor was read from.
Consumed ReadAll(Stream& stream, std::chrono::milliseconds step,
                 std::vector<std::string>* files = nullptr) {
  Consumed out;
  Batch batch;
  while ((out.status = stream.Next(&batch)).ok()) {
    if (files != nullptr) files->push_back(MappedFile(batch.tensors()[0].data));
    out.ids.insert(out.ids.end(), batch.sample_ids().begin(),
                   batch.sample_ids().end());
    out.batches.push_back(BatchBytes(batch));
    out.positions.emplace_back(batch.epoch(), batch.step());
    out.shared.push_back(batch.shared());
    std::this_thread::sleep_for(step);
  }
  return out;
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint64_t> EpochsOfIds(uint64_t n, int epochs) {
  std::vector<uint64_t> v;
  for (int e = 0; e < epochs; ++e) {
    for (uint64_t i = 0; i < n; ++i) v.push_back(i);
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(SharingTest, TwoSharedJobsReceiveIdenticalBytesBuiltOnce) {
  auto server = TestServer::Start(TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  // What one job gets alone, unshared: the reference bytes.
  StreamOptions alone = Options("alone", 2);
  alone.share = false;
  // Images decoded so far, over every label set.
  const auto decoded = [&] {
    uint64_t n = 0;
    for (const auto& label : (*server)->server()->Stats().labels) {
      n += label.latency[static_cast<int>(service::Stage::kDecode)].count;
    }
    return n;
  };
  Consumed reference = Consume((*server)->target(), alone);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;
  EXPECT_EQ(decoded(), 100u);  // 50 samples x 2 epochs.

  auto client = Client::Connect((*server)->target());
  auto a = client->OpenStream(Options("sweep-a", 2));
  auto b = client->OpenStream(Options("sweep-b", 2));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->info().shared);
  EXPECT_TRUE((*b)->info().shared);
  Consumed got_a, got_b;
  std::thread ta([&] { got_a = ReadAll(**a, std::chrono::milliseconds(0)); });
  std::thread tb([&] { got_b = ReadAll(**b, std::chrono::milliseconds(0)); });
  ta.join();
  tb.join();
  ASSERT_TRUE(absl::IsOutOfRange(got_a.status)) << got_a.status;
  ASSERT_TRUE(absl::IsOutOfRange(got_b.status)) << got_b.status;
  EXPECT_EQ(got_a.batches, reference.batches);
  EXPECT_EQ(got_b.batches, reference.batches);
  EXPECT_EQ(got_a.ids, reference.ids);
  // Built once: the two jobs decoded each image once between them.
  EXPECT_EQ(decoded(), 200u) << "shared work was done twice";
  // A batch counts as shared when another stream also gets it. The second
  // stream got every batch after the first; the first got a few before the
  // second joined.
  const auto count = [](const std::vector<bool>& v) {
    return std::count(v.begin(), v.end(), true);
  };
  EXPECT_EQ(count(got_b.shared), 20);
  EXPECT_GE(count(got_a.shared), 10);
  // The metrics count the shared batches per label set.
  int64_t shared = 0;
  for (const auto& label : (*server)->server()->Stats().labels) {
    shared += label.shared_batches;
  }
  EXPECT_EQ(shared, count(got_a.shared) + count(got_b.shared));
}

TEST(SharingTest, ShmConsumersReadTheRunsBatchesInPlace) {
  auto server = TestServer::Start(TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  StreamOptions alone = Options("alone", 2);
  alone.share = false;
  Consumed reference = Consume((*server)->target(), alone);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;

  auto client = Client::Connect((*server)->target());
  StreamOptions o = Options("in-place-a", 2);
  o.transport = "shm";
  o.hold = 2;
  auto a = client->OpenStream(o);
  o.job_id = "in-place-b";
  auto b = client->OpenStream(o);
  ASSERT_TRUE(a.ok() && b.ok());
  Consumed got_a, got_b;
  std::vector<std::string> files_a, files_b;
  std::thread ta(
      [&] { got_a = ReadAll(**a, std::chrono::milliseconds(0), &files_a); });
  std::thread tb(
      [&] { got_b = ReadAll(**b, std::chrono::milliseconds(0), &files_b); });
  ta.join();
  tb.join();
  ASSERT_TRUE(absl::IsOutOfRange(got_a.status)) << got_a.status;
  ASSERT_TRUE(absl::IsOutOfRange(got_b.status)) << got_b.status;
  EXPECT_EQ(got_a.batches, reference.batches);
  EXPECT_EQ(got_b.batches, reference.batches);
  // Each consumer read the run's own ring, where the batch was built, with
  // no copy; only its last window of batches (prefetch 2 + hold 2), which
  // it may hold after the stream ends, were copied into its own ring.
  for (const std::vector<std::string>* files : {&files_a, &files_b}) {
    ASSERT_EQ(files->size(), 20u);
    for (size_t i = 0; i < files->size(); ++i) {
      const char* want =
          i < 16 ? "/memfd:stoker-shared-run" : "/memfd:stoker-ring";
      EXPECT_THAT((*files)[i], ::testing::StartsWith(want)) << "batch " << i;
    }
  }
}

class SharingLagTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SharingLagTest, ALaggingConsumerIsDetachedAndBothCoverTheirEpochs) {
  TestServerOptions so;
  so.extra_yaml = "sharing: {lag_window: 2}\n";
  auto server = TestServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  StreamOptions alone = Options("alone", 3);
  alone.share = false;
  Consumed reference = Consume((*server)->target(), alone);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;

  auto client = Client::Connect((*server)->target());
  StreamOptions fast_options = Options("fast", 3);
  StreamOptions slow_options = Options("slow", 3);
  fast_options.transport = slow_options.transport = GetParam();
  auto fast = client->OpenStream(fast_options);
  auto slow = client->OpenStream(slow_options);
  ASSERT_TRUE(fast.ok() && slow.ok());
  Consumed got_fast, got_slow;
  std::chrono::duration<double> fast_took{}, slow_took{};
  std::thread tf([&] {
    const auto t0 = std::chrono::steady_clock::now();
    got_fast = ReadAll(**fast, std::chrono::milliseconds(0));
    fast_took = std::chrono::steady_clock::now() - t0;
  });
  std::thread ts([&] {
    const auto t0 = std::chrono::steady_clock::now();
    got_slow = ReadAll(**slow, std::chrono::milliseconds(40));
    slow_took = std::chrono::steady_clock::now() - t0;
  });
  tf.join();
  ts.join();
  ASSERT_TRUE(absl::IsOutOfRange(got_fast.status)) << got_fast.status;
  ASSERT_TRUE(absl::IsOutOfRange(got_slow.status)) << got_slow.status;
  // Same bytes as alone, every sample of each epoch exactly once.
  EXPECT_EQ(got_fast.batches, reference.batches);
  EXPECT_EQ(got_slow.batches, reference.batches);
  EXPECT_THAT(Sorted(got_slow.ids), ElementsAreArray(EpochsOfIds(50, 3)));
  // The slow one was detached: its later batches were built for it alone,
  // and the fast one did not wait for it.
  ASSERT_FALSE(got_slow.shared.empty());
  EXPECT_FALSE(got_slow.shared.back());
  EXPECT_LT(fast_took.count(), slow_took.count() / 2);
}

INSTANTIATE_TEST_SUITE_P(Transports, SharingLagTest,
                         ::testing::Values("grpc", "shm"));

TEST(SharingTest, StreamsOverShmAndGrpcShareOneRun) {
  auto server = TestServer::Start(TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect((*server)->target());
  // The grpc stream opens the run; the shm one has a larger window (its
  // held batch on top of prefetch) and joins it all the same.
  auto a = client->OpenStream(Options("over-grpc", 1));
  StreamOptions shm = Options("over-shm", 1);
  shm.transport = "shm";
  shm.hold = 2;
  auto b = client->OpenStream(shm);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->info().shared);
  EXPECT_TRUE((*b)->info().shared);
  Consumed got_a, got_b;
  std::thread ta([&] { got_a = ReadAll(**a, std::chrono::milliseconds(0)); });
  std::thread tb([&] { got_b = ReadAll(**b, std::chrono::milliseconds(0)); });
  ta.join();
  tb.join();
  EXPECT_EQ(got_a.batches, got_b.batches);
  EXPECT_EQ(std::count(got_b.shared.begin(), got_b.shared.end(), true), 10);
}

TEST(SharingTest, StreamsOfDifferentPlansDoNotShare) {
  auto server = TestServer::Start(TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect((*server)->target());
  StreamOptions one = Options("p1", 1);
  StreamOptions two = Options("p2", 1);
  two.seed = 4;
  auto a = client->OpenStream(one);
  auto b = client->OpenStream(two);
  ASSERT_TRUE(a.ok() && b.ok());
  Consumed got_a = ReadAll(**a, std::chrono::milliseconds(0));
  Consumed got_b = ReadAll(**b, std::chrono::milliseconds(0));
  EXPECT_NE(got_a.batches, got_b.batches);
  for (bool s : got_a.shared) EXPECT_FALSE(s);
  for (bool s : got_b.shared) EXPECT_FALSE(s);
}

}  // namespace
}  // namespace stoker
