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
  StreamOptions o = testing::TestStream("train", 5, /*seed=*/3, epochs);
  o.job_id = job;
  o.share = true;
  o.prefetch = 2;
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

// A consumer: what it asks for, and how long it sleeps after each batch.
struct Reader {
  StreamOptions options;
  std::chrono::milliseconds step{0};
};

// What one consumer read.
struct Read {
  bool shared = false;  // The stream joined a shared run.
  Consumed got;
  std::vector<std::string> files;  // Mapping of each batch's first tensor.
  std::chrono::duration<double> took{};
};

// Opens a stream for each reader, all before the first read, then reads
// them all at once, each on its own thread, to the end.
std::vector<Read> ReadTogether(const std::string& target,
                               const std::vector<Reader>& readers) {
  auto client = Client::Connect(target);
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<Read> out(readers.size());
  for (size_t i = 0; i < readers.size(); ++i) {
    auto stream = client->OpenStream(readers[i].options);
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return {};
    out[i].shared = (*stream)->info().shared;
    streams.push_back(*std::move(stream));
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < readers.size(); ++i) {
    threads.emplace_back([&, i] {
      const auto start = std::chrono::steady_clock::now();
      Consumed& got = out[i].got;
      Batch batch;
      while ((got.status = streams[i]->Next(&batch)).ok()) {
        out[i].files.push_back(MappedFile(batch.tensors()[0].data));
        got.ids.insert(got.ids.end(), batch.sample_ids().begin(),
                       batch.sample_ids().end());
        got.batches.push_back(BatchBytes(batch));
        got.shared.push_back(batch.shared());
        std::this_thread::sleep_for(readers[i].step);
      }
      out[i].took = std::chrono::steady_clock::now() - start;
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

int64_t CountShared(const Consumed& c) {
  return std::count(c.shared.begin(), c.shared.end(), true);
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
  // A lag window past both epochs: a consumer thread the machine leaves
  // unscheduled for a while is never detached (a later test covers that),
  // so the work is shared however the two threads are scheduled.
  TestServerOptions options;
  options.extra_yaml = "sharing: {lag_window: 100}\n";
  auto server = TestServer::Start(options);
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

  std::vector<Read> read = ReadTogether(
      (*server)->target(), {{Options("sweep-a", 2)}, {Options("sweep-b", 2)}});
  ASSERT_EQ(read.size(), 2u);
  EXPECT_TRUE(read[0].shared && read[1].shared);
  const Consumed& got_a = read[0].got;
  const Consumed& got_b = read[1].got;
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
  EXPECT_EQ(CountShared(got_b), 20);
  EXPECT_GE(CountShared(got_a), 10);
  // The metrics count the shared batches per label set.
  int64_t shared = 0;
  for (const auto& label : (*server)->server()->Stats().labels) {
    shared += label.counts[service::Count::kSharedBatches];
  }
  EXPECT_EQ(shared, CountShared(got_a) + CountShared(got_b));
}

TEST(SharingTest, ShmConsumersReadTheRunsBatchesInPlace) {
  // A lag window longer than the stream: neither consumer is detached, even
  // when a loaded machine leaves one thread waiting while the other reads
  // ahead (the lag tests below cover detaching).
  TestServerOptions options;
  options.extra_yaml = "sharing: {lag_window: 64}\n";
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  StreamOptions alone = Options("alone", 2);
  alone.share = false;
  Consumed reference = Consume((*server)->target(), alone);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;

  StreamOptions a = Options("in-place-a", 2);
  a.transport = "shm";
  a.hold = 2;
  StreamOptions b = a;
  b.job_id = "in-place-b";
  std::vector<Read> read = ReadTogether((*server)->target(), {{a}, {b}});
  ASSERT_EQ(read.size(), 2u);
  // Each consumer read the run's own ring, where the batch was built, with
  // no copy; only its last window of batches (prefetch 2 + hold 2), which
  // it may hold after the stream ends, were copied into its own ring.
  for (const Read& r : read) {
    ASSERT_TRUE(absl::IsOutOfRange(r.got.status)) << r.got.status;
    EXPECT_EQ(r.got.batches, reference.batches);
    ASSERT_EQ(r.files.size(), 20u);
    for (size_t i = 0; i < r.files.size(); ++i) {
      const char* want =
          i < 16 ? "/memfd:stoker-shared-run" : "/memfd:stoker-ring";
      EXPECT_THAT(r.files[i], ::testing::StartsWith(want)) << "batch " << i;
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

  StreamOptions fast = Options("fast", 3);
  StreamOptions slow = Options("slow", 3);
  fast.transport = slow.transport = GetParam();
  std::vector<Read> read = ReadTogether(
      (*server)->target(), {{fast}, {slow, std::chrono::milliseconds(40)}});
  ASSERT_EQ(read.size(), 2u);
  const Consumed& got_fast = read[0].got;
  const Consumed& got_slow = read[1].got;
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
  EXPECT_LT(read[0].took.count(), read[1].took.count() / 2);
}

INSTANTIATE_TEST_SUITE_P(Transports, SharingLagTest,
                         ::testing::Values("grpc", "shm"));

TEST(SharingTest, StreamsOverShmAndGrpcShareOneRun) {
  auto server = TestServer::Start(TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  // The grpc stream opens the run; the shm one has a larger window (its
  // held batch on top of prefetch) and joins it all the same.
  StreamOptions shm = Options("over-shm", 1);
  shm.transport = "shm";
  shm.hold = 2;
  std::vector<Read> read =
      ReadTogether((*server)->target(), {{Options("over-grpc", 1)}, {shm}});
  ASSERT_EQ(read.size(), 2u);
  EXPECT_TRUE(read[0].shared && read[1].shared);
  EXPECT_EQ(read[0].got.batches, read[1].got.batches);
  EXPECT_EQ(CountShared(read[1].got), 10);
}

TEST(SharingTest, StreamsOfDifferentPlansDoNotShare) {
  auto server = TestServer::Start(TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  StreamOptions two = Options("p2", 1);
  two.seed = 4;
  std::vector<Read> read =
      ReadTogether((*server)->target(), {{Options("p1", 1)}, {two}});
  ASSERT_EQ(read.size(), 2u);
  EXPECT_NE(read[0].got.batches, read[1].got.batches);
  EXPECT_EQ(CountShared(read[0].got), 0);
  EXPECT_EQ(CountShared(read[1].got), 0);
}

}  // namespace
}  // namespace stoker
