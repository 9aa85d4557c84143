#include "server/service/shared_run.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/batch_encoder.h"
#include "server/service/shared_runs.h"
#include "server/service/stream.h"
#include "tests/service/service_fixture.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::service {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kWindow = 2;

class SharedRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = fixture::MakeTypedCatalog(dir_.path());
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    pool_.Start();
  }

  // A stream of `spec` that asked to share, joined through `runs`.
  std::shared_ptr<Stream> Join(SharedRuns& runs, StreamSpec spec,
                               absl::Status* refused = nullptr) {
    spec.share = true;
    auto options = fixture::OptionsFor(spec, catalog_, &pool_);
    EXPECT_TRUE(options.ok()) << options.status();
    const Stream::Options copy = *options;
    auto stream = std::make_shared<Stream>(*std::move(options));
    absl::StatusOr<std::shared_ptr<BufferSource>> memory = runs.Join(
        stream, copy, kWindow, 1.0, stream->layout().Capacity());
    if (refused != nullptr) *refused = memory.status();
    return stream;
  }

  testing::ScopedTempDir dir_;
  std::shared_ptr<const Catalog> catalog_;
  pipeline::WorkerPool pool_{2};
  std::shared_ptr<Admission> admission_ =
      std::make_shared<Admission>(&pool_, AdmissionLimits{});
};

// Encodes every batch it is given.
class MarkingEncoder : public BatchEncoder {
 public:
  bool adaptive() const override { return false; }
  void Encode(ReadyBatch* batch, uint8_t*, bool, Counts*) const override {
    batch->compression = Compression::kZstd;
  }
};

TEST_F(SharedRunTest, StreamsOfOnePlanShareOneRunAndGetTheSameBatches) {
  SharedRuns runs(&pool_, admission_.get(), /*lag_window=*/8, {});
  std::shared_ptr<Stream> a = Join(runs, fixture::TypedSpec("all", 4));
  std::shared_ptr<Stream> b = Join(runs, fixture::TypedSpec("all", 4));
  // A lent batch goes as the run built it, whatever its delivery encodes.
  a->SetEncoder(std::make_shared<MarkingEncoder>());
  EXPECT_EQ(runs.alive(), 1u);
  EXPECT_TRUE(a->stats().sharing);
  EXPECT_TRUE(b->stats().sharing);
  // Another plan (seed) gets a run of its own.
  StreamSpec other = fixture::TypedSpec("all", 4);
  other.seed = 99;
  std::shared_ptr<Stream> c = Join(runs, other);
  EXPECT_EQ(runs.alive(), 2u);

  // One consumer runs ahead: the run keeps what the other still needs.
  fixture::Drained da = fixture::Drain(*a, kWindow);
  fixture::Drained db = fixture::Drain(*b, kWindow);
  ASSERT_TRUE(da.status.ok()) << da.status;
  ASSERT_TRUE(db.status.ok()) << db.status;
  ASSERT_EQ(da.batches.size(), 7u);
  ASSERT_EQ(db.batches.size(), 7u);
  for (size_t i = 0; i < da.batches.size(); ++i) {
    EXPECT_EQ(da.batches[i].step, i);
    EXPECT_EQ(da.batches[i].sample_ids, db.batches[i].sample_ids);
    EXPECT_EQ(fixture::Labels(da.batches[i]), fixture::Labels(db.batches[i]));
    EXPECT_TRUE(da.batches[i].shared);
    EXPECT_EQ(da.batches[i].compression, Compression::kNone);
  }
  EXPECT_EQ(a->stats().counts[Count::kSharedBatches], 7);
  EXPECT_EQ(b->stats().counts[Count::kSharedBatches], 7);
  EXPECT_EQ(b->stats().counts[Count::kSamples], fixture::kSamples);
  c->Cancel();
}

// A consumer that lags by more than the lag window pins the run's oldest
// batch: it is detached and finishes on its own tasks, and the others are
// not held back.
TEST_F(SharedRunTest, ALaggingStreamIsDetachedAndFinishesAlone) {
  SharedRuns runs(&pool_, admission_.get(), /*lag_window=*/1, {});
  std::shared_ptr<Stream> fast = Join(runs, fixture::TypedSpec("all", 4));
  std::shared_ptr<Stream> slow = Join(runs, fixture::TypedSpec("all", 4));
  const size_t bytes = slow->layout().Capacity();
  ASSERT_TRUE(slow->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  ASSERT_TRUE(slow->Fill(std::make_unique<HeapBatchBuffer>(bytes)));
  fixture::Drained df = fixture::Drain(*fast, kWindow);
  ASSERT_TRUE(df.status.ok()) << df.status;
  ASSERT_EQ(df.batches.size(), 7u);
  // The run detaches the laggard after it hands the fast stream its batch.
  EXPECT_TRUE(stoker::testing::WaitFor(
      [&] { return !slow->stats().sharing; }, std::chrono::seconds(10)))
      << "the laggard was not detached";
  fixture::Drained ds = fixture::Drain(*slow, kWindow);
  ASSERT_TRUE(ds.status.ok()) << ds.status;
  ASSERT_EQ(ds.batches.size(), 7u);
  for (size_t i = 0; i < ds.batches.size(); ++i) {
    EXPECT_EQ(ds.batches[i].step, i);
    EXPECT_EQ(ds.batches[i].sample_ids, df.batches[i].sample_ids);
    EXPECT_EQ(fixture::Labels(ds.batches[i]), fixture::Labels(df.batches[i]));
  }
  // What it got before it was detached came from the run.
  EXPECT_GE(slow->stats().counts[Count::kSharedBatches], 1);
  EXPECT_LT(slow->stats().counts[Count::kSharedBatches], 7);
}

TEST_F(SharedRunTest, AStreamJoinsOnlyAtAPositionTheRunStillHolds) {
  SharedRuns runs(&pool_, admission_.get(), /*lag_window=*/1, {});
  std::shared_ptr<Stream> first = Join(runs, fixture::TypedSpec("all", 4));
  ASSERT_TRUE(fixture::Drain(*first, kWindow).status.ok());
  // The run still holds the last batch it built.
  StreamSpec last = fixture::TypedSpec("all", 4);
  last.start_step = 6;
  std::shared_ptr<Stream> late = Join(runs, last);
  EXPECT_EQ(runs.alive(), 1u);
  EXPECT_TRUE(late->stats().sharing);
  fixture::Drained d = fixture::Drain(*late, kWindow);
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.batches.size(), 1u);
  EXPECT_EQ(d.batches[0].step, 6u);
  // The start was dropped long ago: a run of its own.
  std::shared_ptr<Stream> again = Join(runs, fixture::TypedSpec("all", 4));
  EXPECT_EQ(runs.alive(), 2u);
  EXPECT_EQ(fixture::Drain(*again, kWindow).batches.size(), 7u);
}

TEST_F(SharedRunTest, ARunTheBudgetCannotHoldIsRefusedAndTheStreamBuildsAlone) {
  pipeline::WorkerPool pool(1);
  auto tight = std::make_shared<Admission>(
      &pool, AdmissionLimits{8, 8, /*memory_budget=*/1});
  SharedRuns runs(&pool_, tight.get(), /*lag_window=*/8, {});
  absl::Status refused;
  std::shared_ptr<Stream> s =
      Join(runs, fixture::TypedSpec("all", 4), &refused);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("a shared run (10 batches"));
  EXPECT_EQ(runs.alive(), 0u);
  EXPECT_FALSE(s->stats().sharing);
  fixture::Drained d = fixture::Drain(*s, kWindow);
  ASSERT_TRUE(d.status.ok()) << d.status;
  EXPECT_EQ(d.batches.size(), 7u);
  EXPECT_EQ(s->stats().counts[Count::kSharedBatches], 0);
}

TEST_F(SharedRunTest, ARunThatFailsFailsItsStreamsAtThatBatch) {
  SharedRuns runs(&pool_, admission_.get(), /*lag_window=*/8, {});
  std::shared_ptr<Stream> a = Join(runs, fixture::TypedSpec("short_fail", 1));
  std::shared_ptr<Stream> b = Join(runs, fixture::TypedSpec("short_fail", 1));
  fixture::Drained da = fixture::Drain(*a, kWindow);
  fixture::Drained db = fixture::Drain(*b, kWindow);
  EXPECT_EQ(da.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(db.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(da.batches.size(), db.batches.size());
}

}  // namespace
}  // namespace stoker::service
