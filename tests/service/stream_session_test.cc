#include "server/service/stream_session.h"

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "gtest/gtest.h"
#include "server/service/batch.h"

namespace stoker::service {
namespace {

using Kind = StreamSession::Action::Kind;

// A source of `total` batches; a batch started with Fill is ready once the
// test says so (Finish), in order.
class FakeSource : public BatchSource {
 public:
  explicit FakeSource(uint64_t total, uint64_t steps_per_epoch = 100)
      : total_(total), steps_(steps_per_epoch) {}

  bool Fill(std::unique_ptr<BatchBuffer> buffer) override {
    if (!HasMore()) return false;
    building_.push_back(std::move(buffer));
    ++started_;
    return true;
  }
  bool HasMore() override { return status_.ok() && started_ < total_; }
  std::optional<ReadyBatch> TakeReady() override {
    if (ready_ == 0) return std::nullopt;
    --ready_;
    ReadyBatch b;
    b.epoch = taken_ / steps_;
    b.step = taken_ % steps_;
    b.buffer = std::move(building_.front());
    building_.pop_front();
    ++taken_;
    return b;
  }
  bool Done() override { return !status_.ok() || taken_ == total_; }
  absl::Status status() override { return status_; }

  // The oldest `n` started batches are done.
  void Finish(uint64_t n) { ready_ += n; }
  void Fail(absl::Status s) { status_ = std::move(s); }
  uint64_t started() const { return started_; }

 private:
  const uint64_t total_;
  const uint64_t steps_;
  uint64_t started_ = 0, taken_ = 0, ready_ = 0;
  std::deque<std::unique_ptr<BatchBuffer>> building_;
  absl::Status status_;
};

// `free` buffers at most; MayEnd once every batch is acknowledged, as grpc.
class FakeSlots : public BufferSlots {
 public:
  explicit FakeSlots(int free) : free_(free) {}
  std::unique_ptr<BatchBuffer> Take() override {
    if (free_ == 0) return nullptr;
    --free_;
    return std::make_unique<HeapBatchBuffer>(64);
  }
  bool MayEnd(uint32_t in_flight) const override { return in_flight == 0; }
  void Return() { ++free_; }

 private:
  int free_;
};

TEST(StreamSessionTest, TheWindowIsPrefetchPlusWhatAnShmClientHolds) {
  EXPECT_EQ(StreamSession::Window(4, /*client_holds=*/false, 3), 4u);
  EXPECT_EQ(StreamSession::Window(4, /*client_holds=*/true, 3), 7u);
  // A client that holds batches holds at least one.
  EXPECT_EQ(StreamSession::Window(4, /*client_holds=*/true, 0), 5u);
}

TEST(StreamSessionTest, StartsNoMoreThanTheWindowUntilAnAck) {
  StreamSession session(2);
  FakeSource source(10);
  FakeSlots slots(10);
  EXPECT_EQ(session.Next(source, slots, true, true).kind, Kind::kWait);
  EXPECT_EQ(source.started(), 2u);
  source.Finish(2);
  StreamSession::Action a = session.Next(source, slots, true, true);
  ASSERT_EQ(a.kind, Kind::kSend);
  EXPECT_EQ(a.batch->step, 0u);
  a = session.Next(source, slots, true, true);
  ASSERT_EQ(a.kind, Kind::kSend);
  EXPECT_EQ(a.batch->step, 1u);
  // Both sent, neither acknowledged: the window is full.
  EXPECT_EQ(session.Next(source, slots, true, true).kind, Kind::kWait);
  EXPECT_EQ(source.started(), 2u);
  EXPECT_EQ(session.in_flight(), 2u);
  EXPECT_EQ(StreamSession::AckResult::kFreed, session.OnAck(0, 0));
  session.Fill(source, slots);
  EXPECT_EQ(source.started(), 3u);
}

TEST(StreamSessionTest, StartsNothingWithoutAFreeBuffer) {
  StreamSession session(4);
  FakeSource source(10);
  FakeSlots slots(1);
  session.Fill(source, slots);
  EXPECT_EQ(source.started(), 1u);
  slots.Return();
  session.Fill(source, slots);
  EXPECT_EQ(source.started(), 2u);
}

TEST(StreamSessionTest, AcksOutOfOrderAndInListsEachFreeTheirPlace) {
  StreamSession session(3);
  FakeSource source(10);
  FakeSlots slots(10);
  session.Fill(source, slots);
  source.Finish(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(session.Next(source, slots, true, true).kind, Kind::kSend);
  }
  // An AckList: the adapter calls OnAck for each, in any order.
  EXPECT_EQ(StreamSession::AckResult::kFreed, session.OnAck(0, 2));
  EXPECT_EQ(StreamSession::AckResult::kFreed, session.OnAck(0, 0));
  EXPECT_EQ(session.in_flight(), 1u);
  EXPECT_EQ(StreamSession::AckResult::kFreed, session.OnAck(0, 1));
  EXPECT_EQ(session.in_flight(), 0u);
}

TEST(StreamSessionTest, ARepeatedOrMadeUpAckFreesNothing) {
  using Ack = StreamSession::AckResult;
  StreamSession session(1);
  FakeSource source(10);
  FakeSlots slots(10);
  session.Fill(source, slots);
  source.Finish(1);
  ASSERT_EQ(session.Next(source, slots, true, true).kind, Kind::kSend);
  EXPECT_EQ(session.OnAck(0, 7), Ack::kNeverSent);
  EXPECT_EQ(session.in_flight(), 1u);
  EXPECT_EQ(session.OnAck(0, 0), Ack::kFreed);
  EXPECT_EQ(session.OnAck(0, 0), Ack::kRepeated);
  session.Fill(source, slots);
  EXPECT_EQ(source.started(), 2u) << "only one place was freed";
  EXPECT_EQ(session.in_flight(), 1u);
}

TEST(StreamSessionTest, AnAckBeforeAnyBatchWasSentIsNeverSent) {
  StreamSession session(2);
  EXPECT_EQ(session.OnAck(0, 0), StreamSession::AckResult::kNeverSent);
}

TEST(StreamSessionTest, SendsNothingWhileTheAdapterCannot) {
  StreamSession session(2);
  FakeSource source(2);
  FakeSlots slots(10);
  session.Fill(source, slots);
  source.Finish(2);
  // A write in flight, or a notice socket not yet connected.
  EXPECT_EQ(session.Next(source, slots, false, false).kind, Kind::kWait);
  EXPECT_EQ(session.Next(source, slots, true, true).kind, Kind::kSend);
}

TEST(StreamSessionTest, EndsAcrossEpochsOnceTheLastBatchIsAcknowledged) {
  StreamSession session(2);
  FakeSource source(4, /*steps_per_epoch=*/2);
  FakeSlots slots(10);
  std::vector<std::pair<uint64_t, uint64_t>> sent;
  for (int round = 0; round < 20 && sent.size() < 4; ++round) {
    session.Fill(source, slots);
    source.Finish(source.started() - sent.size());
    StreamSession::Action a = session.Next(source, slots, true, true);
    while (a.kind == Kind::kSend) {
      sent.emplace_back(a.batch->epoch, a.batch->step);
      slots.Return();
      a = session.Next(source, slots, true, true);
    }
    EXPECT_NE(a.kind, Kind::kFinish) << "ended with batches unacknowledged";
    for (auto [e, s] : sent) session.OnAck(e, s);
  }
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[2], (std::pair<uint64_t, uint64_t>{1, 0}));
  // Every batch sent: the stream ends once the transport agrees, and only
  // when the adapter can end it.
  EXPECT_EQ(session.Next(source, slots, true, false).kind, Kind::kWait);
  StreamSession::Action end = session.Next(source, slots, true, true);
  EXPECT_EQ(end.kind, Kind::kFinish);
  EXPECT_TRUE(end.status.ok());
}

TEST(StreamSessionTest, AFailedSourceEndsTheStreamAtOnceWithItsStatus) {
  StreamSession session(2);
  FakeSource source(10);
  FakeSlots slots(10);
  session.Fill(source, slots);
  source.Fail(absl::CancelledError("cancelled"));
  // Even where the adapter could not end a stream that ran to its end.
  StreamSession::Action a = session.Next(source, slots, false, false);
  EXPECT_EQ(a.kind, Kind::kFinish);
  EXPECT_EQ(a.status.code(), absl::StatusCode::kCancelled);
}

TEST(StreamSessionTest, ALentBatchIsInFlightUntilItsAck) {
  StreamSession session(1);
  FakeSlots slots(10);
  // A shared run's batch, lent in place: the stream's own buffer rides
  // along, so the batch keeps its place in the window.
  class LendingSource : public FakeSource {
   public:
    LendingSource() : FakeSource(2) {}
    std::optional<ReadyBatch> TakeReady() override {
      std::optional<ReadyBatch> b = FakeSource::TakeReady();
      if (!b.has_value()) return b;
      auto run_batch = std::make_shared<ReadyBatch>();
      run_batch->buffer = std::make_unique<HeapBatchBuffer>(64);
      b->buffer = std::make_unique<LentBatchBuffer>(std::move(run_batch),
                                                    std::move(b->buffer));
      b->shared = true;
      return b;
    }
  } source;
  session.Fill(source, slots);
  source.Finish(1);
  StreamSession::Action a = session.Next(source, slots, true, true);
  ASSERT_EQ(a.kind, Kind::kSend);
  EXPECT_TRUE(a.batch->shared);
  EXPECT_EQ(session.in_flight(), 1u);
  session.Fill(source, slots);
  EXPECT_EQ(source.started(), 1u);
  EXPECT_EQ(StreamSession::AckResult::kFreed, session.OnAck(0, 0));
  session.Fill(source, slots);
  EXPECT_EQ(source.started(), 2u);
}

}  // namespace
}  // namespace stoker::service
