#include "server/service/stream.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/synchronization/mutex.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/batch_encoder.h"
#include "server/service/remote_source.h"
#include "tests/service/service_fixture.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::service {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Position = std::pair<uint64_t, uint64_t>;

std::vector<Position> Positions(const fixture::Drained& d) {
  std::vector<Position> out;
  for (const ReadyBatch& b : d.batches) out.emplace_back(b.epoch, b.step);
  return out;
}

// Samples of the typed dataset with more than 5 tokens (short_* pipelines).
bool Long(uint64_t id) { return (5 * id) % 13 > 5; }

// The clock of a stream's ack window, moved by the test.
std::atomic<int64_t> fake_now{0};
int64_t FakeNow() { return fake_now.load(); }

class FakeChunk : public RemoteChunk {
 public:
  void Cancel() override { cancelled_ = true; }
  bool cancelled() const override { return cancelled_; }

 private:
  std::atomic<bool> cancelled_{false};
};

// Places chunks of two positions while `place` says so, and records what
// each stream asked. Place runs under the stream's lock, on the thread
// that calls Fill: the test's.
class FakePlacer : public ChunkPlacer {
 public:
  uint32_t chunk_steps(uint32_t window) const override { return 2; }
  std::shared_ptr<RemoteChunk> Place(const ChunkRequest& request,
                                     std::weak_ptr<ChunkSink> sink) override {
    requests.push_back(request);
    requests.back().content_digest = {};  // Borrowed for the call.
    if (!place) return nullptr;
    chunks.push_back(std::make_shared<FakeChunk>());
    return chunks.back();
  }
  bool place = true;
  std::vector<ChunkRequest> requests;
  std::vector<std::shared_ptr<FakeChunk>> chunks;
};

// A helper's copy of `b`, borrowing its buffer.
RemoteBatch AsRemote(const ReadyBatch& b) {
  RemoteBatch r;
  r.epoch = b.epoch;
  r.step = b.step;
  r.sample_ids = b.sample_ids;
  r.skipped_ids = b.skipped_ids;
  for (const BatchTensor& t : b.tensors) {
    r.tensors.push_back({t.spec.name, t.spec.dtype, t.spec.shape,
                         b.buffer->data() + t.offset, t.length});
  }
  return r;
}

// Marks what it encodes, and records whether sending was behind for each.
class FakeEncoder : public BatchEncoder {
 public:
  explicit FakeEncoder(bool adaptive) : adaptive_(adaptive) {}
  bool adaptive() const override { return adaptive_; }
  void Encode(ReadyBatch* batch, uint8_t* data, bool behind,
              Counts* counts) const override {
    absl::MutexLock lock(&mu_);
    behind_.push_back(behind);
    batch->compression = Compression::kZstd;
    counts->Add(Count::kCompressedBatches, 1);
  }
  std::vector<bool> behind() const {
    absl::MutexLock lock(&mu_);
    return behind_;
  }

 private:
  const bool adaptive_;
  mutable absl::Mutex mu_;
  mutable std::vector<bool> behind_ ABSL_GUARDED_BY(mu_);
};

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = fixture::MakeTypedCatalog(dir_.path());
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    pool_.Start();
  }

  std::shared_ptr<Stream> Make(const StreamSpec& spec,
                               OnCorrupt on_corrupt = OnCorrupt::kSkip,
                               ChunkPlacer* placer = nullptr,
                               pipeline::WorkerPool* pool = nullptr) {
    auto options = fixture::OptionsFor(spec, catalog_,
                                       pool != nullptr ? pool : &pool_,
                                       on_corrupt);
    EXPECT_TRUE(options.ok()) << options.status();
    options->placer = placer;
    options->now_ns = &FakeNow;
    return std::make_shared<Stream>(*std::move(options));
  }

  testing::ScopedTempDir dir_;
  std::shared_ptr<const Catalog> catalog_;
  pipeline::WorkerPool pool_{2};
};

TEST_F(StreamTest, HandsOutEveryBatchInOrderAcrossEpochs) {
  std::shared_ptr<Stream> stream = Make(fixture::TypedSpec("all", 4, 2));
  const uint64_t steps = stream->steps_per_epoch();
  ASSERT_EQ(steps, 7u);  // 26 samples in batches of 4, the last of 2.
  fixture::Drained d = fixture::Drain(*stream, /*window=*/3);
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::vector<Position> expected;
  for (uint64_t e = 0; e < 2; ++e) {
    for (uint64_t s = 0; s < steps; ++s) expected.emplace_back(e, s);
  }
  EXPECT_THAT(Positions(d), ElementsAreArray(expected));
  std::vector<std::multiset<uint64_t>> seen(2);
  for (const ReadyBatch& b : d.batches) {
    seen[b.epoch].insert(b.sample_ids.begin(), b.sample_ids.end());
    // Each sample was written to its own place: its label is its id.
    std::vector<int64_t> ids(b.sample_ids.begin(), b.sample_ids.end());
    EXPECT_EQ(fixture::Labels(b), ids);
  }
  for (const auto& epoch : seen) {
    EXPECT_EQ(epoch.size(), uint64_t{fixture::kSamples});
    EXPECT_EQ(std::set<uint64_t>(epoch.begin(), epoch.end()).size(),
              epoch.size())
        << "a sample came twice in one epoch";
  }
  EXPECT_TRUE(stream->Done());
  EXPECT_FALSE(stream->HasMore());
  EXPECT_FALSE(stream->Fill(std::make_unique<HeapBatchBuffer>(64)));
  const CountValues counts = stream->stats().counts;
  EXPECT_EQ(counts[Count::kBatches], 14);
  EXPECT_EQ(counts[Count::kSamples], 2 * fixture::kSamples);
}

TEST_F(StreamTest, ABatchDependsOnlyOnItsPosition) {
  pipeline::WorkerPool one(1);
  one.Start();
  StreamSpec spec = fixture::TypedSpec("all", 3, 2);
  fixture::Drained a = fixture::Drain(*Make(spec), 5);
  fixture::Drained b = fixture::Drain(*Make(spec, OnCorrupt::kSkip, nullptr,
                                            &one), 1);
  ASSERT_EQ(a.batches.size(), b.batches.size());
  for (size_t i = 0; i < a.batches.size(); ++i) {
    EXPECT_EQ(a.batches[i].sample_ids, b.batches[i].sample_ids) << i;
    EXPECT_EQ(fixture::Labels(a.batches[i]), fixture::Labels(b.batches[i]));
  }
  // Another seed, another order.
  spec.seed = 8;
  fixture::Drained c = fixture::Drain(*Make(spec), 5);
  EXPECT_NE(a.batches[0].sample_ids, c.batches[0].sample_ids);
}

TEST_F(StreamTest, StartsAndEndsWhereTheSpecSays) {
  StreamSpec spec = fixture::TypedSpec("all", 4, /*epochs=*/3);
  spec.start_epoch = 1;
  spec.start_step = 5;
  spec.end_epoch = 2;
  spec.end_step = 1;
  fixture::Drained d = fixture::Drain(*Make(spec), 2);
  ASSERT_TRUE(d.status.ok()) << d.status;
  EXPECT_THAT(Positions(d),
              ElementsAreArray(std::vector<Position>{{1, 5}, {1, 6}, {2, 0}}));
  // An end at the start: nothing to build, done at once.
  spec.end_epoch = 1;
  spec.end_step = 5;
  std::shared_ptr<Stream> empty = Make(spec);
  EXPECT_FALSE(empty->HasMore());
  EXPECT_TRUE(empty->Done());
}

// The window: a stream building on its own tasks starts only as many
// batches as keep the workers busy; the rest of its window waits unbuilt
// (and, on shm, unmapped) until one finishes.
TEST_F(StreamTest, HoldsBackOnceEnoughBatchesAreBuilding) {
  pipeline::WorkerPool idle(1);  // Not started: tasks wait.
  std::shared_ptr<Stream> stream =
      Make(fixture::TypedSpec("all", 4), OnCorrupt::kSkip, nullptr, &idle);
  const size_t bytes = stream->layout().Capacity();
  ASSERT_TRUE(stream->HasMore());
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(stream->HasMore());
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  EXPECT_FALSE(stream->HasMore()) << "two batches keep one worker busy";
  EXPECT_FALSE(stream->TakeReady().has_value());
  EXPECT_EQ(stream->stats().building, 2);
  idle.Start();
  idle.Stop();  // Runs every queued task.
  EXPECT_TRUE(stream->HasMore());
  EXPECT_EQ(stream->stats().queued, 2);
  std::optional<ReadyBatch> first = stream->TakeReady();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->step, 0u);
  EXPECT_EQ(stream->TakeReady()->step, 1u);
}

TEST_F(StreamTest, SkipsTheSamplesItCannotUseAndListsThem) {
  fixture::Drained d = fixture::Drain(*Make(fixture::TypedSpec("short_skip", 4)), 3);
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::set<uint64_t> kept, skipped;
  for (const ReadyBatch& b : d.batches) {
    kept.insert(b.sample_ids.begin(), b.sample_ids.end());
    skipped.insert(b.skipped_ids.begin(), b.skipped_ids.end());
    std::vector<int64_t> ids(b.sample_ids.begin(), b.sample_ids.end());
    EXPECT_EQ(fixture::Labels(b), ids);
  }
  for (uint64_t id = 0; id < fixture::kSamples; ++id) {
    EXPECT_EQ(skipped.count(id), Long(id) ? 1u : 0u) << id;
    EXPECT_EQ(kept.count(id), Long(id) ? 0u : 1u) << id;
  }
}

TEST_F(StreamTest, AFailingSampleEndsTheStreamAfterTheBatchesBeforeIt) {
  // The epoch's order, one sample a batch, and where the first long one is.
  fixture::Drained order = fixture::Drain(*Make(fixture::TypedSpec("all", 1)), 4);
  size_t first_long = 0;
  while (!Long(order.batches[first_long].sample_ids[0])) ++first_long;
  std::shared_ptr<Stream> stream = Make(fixture::TypedSpec("short_fail", 1));
  fixture::Drained d = fixture::Drain(*stream, 4);
  EXPECT_EQ(d.status.code(), absl::StatusCode::kResourceExhausted) << d.status;
  // Every batch before the failing one came, in order, and none after.
  ASSERT_EQ(d.batches.size(), first_long);
  for (size_t i = 0; i < d.batches.size(); ++i) {
    EXPECT_EQ(d.batches[i].step, i);
    EXPECT_EQ(d.batches[i].sample_ids, order.batches[i].sample_ids);
  }
  EXPECT_TRUE(stream->Done());
  EXPECT_FALSE(stream->HasMore());
}

TEST_F(StreamTest, ACorruptRecordIsSkippedOrEndsTheStreamAsConfigured) {
  ASSERT_TRUE(testing::CorruptRecordOnDisk(dir_.path() + "/typed", 3).ok());
  fixture::Drained skip = fixture::Drain(*Make(fixture::TypedSpec("all", 4)), 3);
  ASSERT_TRUE(skip.status.ok()) << skip.status;
  std::vector<uint64_t> skipped;
  for (const ReadyBatch& b : skip.batches) {
    skipped.insert(skipped.end(), b.skipped_ids.begin(), b.skipped_ids.end());
  }
  EXPECT_EQ(skipped, std::vector<uint64_t>{3});
  fixture::Drained fail =
      fixture::Drain(*Make(fixture::TypedSpec("all", 4), OnCorrupt::kFail), 3);
  EXPECT_EQ(fail.status.code(), absl::StatusCode::kDataLoss) << fail.status;
  for (const ReadyBatch& b : fail.batches) {
    EXPECT_THAT(b.sample_ids, ::testing::Not(::testing::Contains(3u)));
  }
}

TEST_F(StreamTest, FailEndsTheStreamWithItsStatus) {
  std::shared_ptr<Stream> stream = Make(fixture::TypedSpec("all", 4));
  int calls = 0;
  stream->SetReadyCallback([&] { ++calls; });
  stream->Fail(absl::UnavailableError("shutting down"));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(stream->Done());
  EXPECT_FALSE(stream->HasMore());
  EXPECT_FALSE(stream->Fill(std::make_unique<HeapBatchBuffer>(
      stream->layout().Capacity())));
  EXPECT_EQ(stream->status().code(), absl::StatusCode::kUnavailable);
  stream->SetReadyCallback(nullptr);
}

TEST_F(StreamTest, CancelDropsItsWorkAndNeverCallsBackAgain) {
  pipeline::WorkerPool idle(1);
  std::shared_ptr<Stream> stream =
      Make(fixture::TypedSpec("all", 4), OnCorrupt::kSkip, nullptr, &idle);
  std::atomic<int> calls{0};
  stream->SetReadyCallback([&] { ++calls; });
  const size_t bytes = stream->layout().Capacity();
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  stream->Cancel(absl::CancelledError("the client left"));
  idle.Start();
  idle.Stop();  // The queued tasks run, and skip their work.
  EXPECT_EQ(calls.load(), 0);
  EXPECT_FALSE(stream->TakeReady().has_value());
  EXPECT_TRUE(stream->Done());
  EXPECT_EQ(stream->status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(stream->status().message(), HasSubstr("the client left"));
}

// A chunk placed on a helper that ends before it delivered (the helper
// failed): the stream builds its batches here, in their place in order.
TEST_F(StreamTest, BuildsHereWhatAChunkThatEndedEarlyDidNotDeliver) {
  fixture::Drained local = fixture::Drain(*Make(fixture::TypedSpec("all", 4)), 3);
  FakePlacer placer;
  std::shared_ptr<Stream> stream =
      Make(fixture::TypedSpec("all", 4), OnCorrupt::kSkip, &placer);
  const size_t bytes = stream->layout().Capacity();
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_EQ(placer.chunks.size(), 1u);
  ASSERT_EQ(placer.requests.size(), 1u);
  EXPECT_EQ(placer.requests[0].begin, 0u);
  EXPECT_EQ(placer.requests[0].end, 2u);
  EXPECT_EQ(placer.requests[0].steps_per_epoch, 7u);
  EXPECT_TRUE(placer.requests[0].starved);
  EXPECT_FALSE(stream->TakeReady().has_value()) << "the helper's to build";
  placer.place = false;
  stream->ChunkEnded(0);
  fixture::Drained d = fixture::Drain(*stream, 3);
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.batches.size(), local.batches.size());
  for (size_t i = 0; i < d.batches.size(); ++i) {
    EXPECT_EQ(d.batches[i].step, i);
    EXPECT_EQ(d.batches[i].sample_ids, local.batches[i].sample_ids);
  }
  EXPECT_EQ(stream->stats().counts[Count::kRemoteRebuilt], 2);
  EXPECT_EQ(stream->stats().counts[Count::kRemoteBatches], 0);
}

TEST_F(StreamTest, TakesAHelpersBatchInItsPlace) {
  fixture::Drained local = fixture::Drain(*Make(fixture::TypedSpec("all", 4)), 3);
  FakePlacer placer;
  std::shared_ptr<Stream> stream =
      Make(fixture::TypedSpec("all", 4), OnCorrupt::kSkip, &placer);
  const size_t bytes = stream->layout().Capacity();
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  placer.place = false;
  TakeReport report;
  // A batch of another position is refused; the chunk would end then.
  EXPECT_EQ(stream->TakeRemote(0, 0, AsRemote(local.batches[1]), &report)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(
      stream->TakeRemote(0, 0, AsRemote(local.batches[0]), &report).ok());
  ASSERT_TRUE(
      stream->TakeRemote(0, 1, AsRemote(local.batches[1]), &report).ok());
  stream->ChunkEnded(0);
  fixture::Drained d = fixture::Drain(*stream, 3);
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.batches.size(), local.batches.size());
  for (size_t i = 0; i < d.batches.size(); ++i) {
    EXPECT_EQ(d.batches[i].sample_ids, local.batches[i].sample_ids) << i;
    EXPECT_EQ(fixture::Labels(d.batches[i]), fixture::Labels(local.batches[i]));
  }
  EXPECT_EQ(stream->stats().counts[Count::kRemoteBatches], 2);
  EXPECT_EQ(stream->stats().counts[Count::kRemoteRebuilt], 0);
}

// The wire encoding is the delivery's: the stream runs it on the worker
// that finished each batch it built, with the decoded size kept.
TEST_F(StreamTest, RunsItsDeliverysEncoderOnEveryBatchItBuilds) {
  std::shared_ptr<Stream> stream = Make(fixture::TypedSpec("all", 4));
  auto encoder = std::make_shared<FakeEncoder>(/*adaptive=*/false);
  stream->SetEncoder(encoder);
  fixture::Drained d = fixture::Drain(*stream, 3);
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.batches.size(), 7u);
  for (const ReadyBatch& b : d.batches) {
    EXPECT_EQ(b.compression, Compression::kZstd);
    EXPECT_EQ(b.decoded_bytes, b.bytes);
  }
  EXPECT_EQ(encoder->behind().size(), 7u);
  EXPECT_EQ(stream->stats().counts[Count::kCompressedBatches], 7);
}

// An adaptive encoding hears whether an earlier finished batch still waits
// to be taken: sending has fallen behind building.
TEST_F(StreamTest, TellsAnAdaptiveEncoderWhenSendingIsBehind) {
  pipeline::WorkerPool idle(1);  // One worker: batch 0 finishes first.
  std::shared_ptr<Stream> stream =
      Make(fixture::TypedSpec("all", 4), OnCorrupt::kSkip, nullptr, &idle);
  auto encoder = std::make_shared<FakeEncoder>(/*adaptive=*/true);
  stream->SetEncoder(encoder);
  const size_t bytes = stream->layout().Capacity();
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  idle.Start();
  idle.Stop();
  EXPECT_EQ(encoder->behind(), (std::vector<bool>{false, true}));
}

// The placer asks how much the consumer stalled over the last second of
// acks, on the stream's own clock.
TEST_F(StreamTest, ThePlacerSeesTheStallShareOfTheLastSecond) {
  FakePlacer placer;
  placer.place = false;
  std::shared_ptr<Stream> stream =
      Make(fixture::TypedSpec("all", 1), OnCorrupt::kSkip, &placer);
  const size_t bytes = stream->layout().Capacity();
  fake_now = 0;
  stream->RecordAck(/*wait_seconds=*/3, /*busy_seconds=*/1);
  fake_now = 500'000'000;
  stream->RecordAck(0, 1);
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_EQ(placer.requests.size(), 1u);
  EXPECT_DOUBLE_EQ(placer.requests[0].stall_share, 3.0 / 5.0);
  // Two seconds on, the first acks are out of the window.
  fake_now = 2'000'000'000;
  stream->RecordAck(0, 1);
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(stream->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_EQ(placer.requests.size(), 2u);
  EXPECT_EQ(placer.requests[1].begin, 2u);
  EXPECT_DOUBLE_EQ(placer.requests[1].stall_share, 0);
  stream->Cancel();
}

}  // namespace
}  // namespace stoker::service
