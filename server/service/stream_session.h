// StreamSession: the protocol of one stream, with nothing of the wire in it:
// how many batches may be in flight (the window), the order they go out in,
// which acknowledgements free a place, and when the stream may end. A
// transport adapter (rpc/stream_reactor.cc) tells it what
// happened and does what it answers; tests/service/stream_session_test.cc
// drives it with fakes, without threads or servers.
//
// A batch is in flight from the moment the session hands a buffer to the
// source until the client acknowledges its position. Only an ack of a batch
// that was sent, once, frees its place: a repeated ack frees nothing, and an
// ack of a position never sent (before the first batch sent, or after the
// last) is the client's mistake, which the adapter ends the stream for.
//
// Example, window 2, a source of three batches:
//   Next(can_send)  -> fills two buffers; batch (0,0) is ready: kSend (0,0)
//   Next(can_send)  -> (0,1) is not ready yet: kWait
//   ... (0,1) ready -> Next: kSend (0,1); nothing starts, two in flight
//   OnAck({0,0})    -> kFreed; Next fills the third buffer: kWait
//   ... (0,2) sent, both acked, the source is done and the transport
//   agrees (MayEnd) -> kFinish OK
//
// Thread-compatible: the adapter calls it under its own lock.
#ifndef STOKER_SERVER_SERVICE_STREAM_SESSION_H_
#define STOKER_SERVER_SERVICE_STREAM_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "server/service/batch.h"

namespace stoker::service {

// The batches a session drives, built elsewhere (service::Stream). Ready
// batches come out in (epoch, step) order.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Starts the next batch in `buffer`; false (the buffer dropped) when no
  // batch is left to start.
  virtual bool Fill(std::unique_ptr<BatchBuffer> buffer) = 0;
  // Whether to hand Fill a buffer now: a batch is left to start, and the
  // source wants to start it now (it may hold back while enough of its
  // batches are being built; it says so again once one is finished).
  virtual bool HasMore() = 0;
  virtual std::optional<ReadyBatch> TakeReady() = 0;
  // Every batch was taken, or the source failed (status()).
  virtual bool Done() = 0;
  virtual absl::Status status() = 0;
};

// Where the buffers of a stream's batches come from: its transport.
class BufferSlots {
 public:
  virtual ~BufferSlots() = default;
  // A free buffer, or null while none is.
  virtual std::unique_ptr<BatchBuffer> Take() = 0;
  // Whether a stream whose every batch was sent may end now, with
  // `in_flight` of them unacknowledged.
  virtual bool MayEnd(uint32_t in_flight) const = 0;
};

class StreamSession {
 public:
  // The window: the prefetch depth, plus, where the client holds batches
  // in the transport's memory after reading them (shm), the batches it may
  // hold (`hold`, at least one). The one place this rule is written on the
  // daemon's side.
  static uint32_t Window(uint32_t prefetch, bool client_holds, uint32_t hold);

  explicit StreamSession(uint32_t window) : window_(window) {}

  struct Action {
    enum Kind { kWait, kSend, kFinish };
    Kind kind = kWait;
    std::optional<ReadyBatch> batch;  // kSend: the next batch, in order.
    absl::Status status;              // kFinish: how the stream ends.
  };

  // Starts batches in free buffers while the window has room and the
  // source wants them (BatchSource::HasMore); then, when
  // the adapter `can_send`, the next ready batch; else whether the stream
  // ends: at once when the source failed, and once it is done when the
  // adapter `can_end` and the transport agrees (BufferSlots::MayEnd).
  Action Next(BatchSource& source, BufferSlots& slots, bool can_send,
              bool can_end);
  // Only starts batches (while the adapter cannot send).
  void Fill(BatchSource& source, BufferSlots& slots);
  // What an ack was. Batches go out in (epoch, step) order, so a position
  // between the first and the last sent that is not in flight was acked
  // before.
  enum class AckResult {
    kFreed,      // The batch was in flight; its place is free.
    kRepeated,   // Acked before (or a made-up step among those sent).
    kNeverSent,  // Before the first batch sent or after the last.
  };
  // The client acknowledged the batch at (epoch, step).
  AckResult OnAck(uint64_t epoch, uint64_t step);

  uint32_t window() const { return window_; }
  // Started and not yet sent, plus sent and not yet acknowledged.
  uint32_t in_flight() const {
    return started_ + static_cast<uint32_t>(sent_.size());
  }

 private:
  const uint32_t window_;
  uint32_t started_ = 0;
  std::set<std::pair<uint64_t, uint64_t>> sent_;
  // The first and the last batch sent, once one was.
  std::optional<std::pair<uint64_t, uint64_t>> first_sent_, last_sent_;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_SESSION_H_
