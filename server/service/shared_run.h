// SharedRun: one preprocessing run whose batches go to several streams.
//
// Streams that opt in (`share: true`) and ask for the same plan (dataset,
// pipeline, seed, batch size, world size, rank, drop_last, ra_reps) attach
// to one run.
// The run builds each batch once, with a private producer Stream into its
// own buffers, and lends it to every attached stream that asks for it: the
// stream's transport hands the run's buffer over in place (a shm client
// maps the run's ring too), and the buffer is reused once every stream has
// let its batch go. Nothing is copied; the decode and augment work is done
// once.
//
// The run keeps at most `capacity` batches, the newest it built; it drops
// the oldest only to make room, so a stream that opens a little later can
// still join at the start. It builds a batch only when some attached stream
// has asked for it. When it cannot build the next
// batch a stream asks for because the slowest stream pins the oldest one,
// that slowest stream is detached: it finishes on a run of its own from its
// position, and the others go on at their pace. So a stream that lags by
// more than the lag window never holds the others back.
//
// A stream joins a run only at a position the run still holds or is about
// to build; otherwise it starts a run of its own that later streams may join.
//
// Thread-safe. The run calls into streams (Deliver, DetachFromRun) only
// outside its lock, and on worker threads, as the batches of a stream that
// builds alone finish on workers.
#ifndef STOKER_SERVER_SERVICE_SHARED_RUN_H_
#define STOKER_SERVER_SERVICE_SHARED_RUN_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/service/admission.h"
#include "server/service/batch.h"

namespace stoker::service {

class Stream;

class SharedRun : public std::enable_shared_from_this<SharedRun> {
 public:
  // `producer` is a Stream that builds the run's batches from `start`
  // (a linear position: epoch * steps_per_epoch + step), endless. `window`
  // is the most batches one attached stream may ask for at once. `memory`
  // has at least BuffersNeeded(capacity, window) buffers.
  static std::shared_ptr<SharedRun> Create(
      std::shared_ptr<Stream> producer, uint64_t start, uint32_t capacity,
      uint32_t window, std::shared_ptr<PoolGroup> group,
      std::shared_ptr<BufferSource> memory);
  ~SharedRun();

  // Streams of the run's window attached at once, at most; a later one
  // starts another run.
  static constexpr uint32_t kMaxStreams = 16;
  // Buffers a run never runs out of: those it keeps, plus a window lent to
  // each attached stream, which holds them until its consumer lets go.
  // (Buffers are memory only once first used.)
  static uint32_t BuffersNeeded(uint32_t capacity, uint32_t window) {
    return capacity + kMaxStreams * window;
  }

  const std::shared_ptr<BufferSource>& memory() const { return memory_; }
  SharedRun(const SharedRun&) = delete;
  SharedRun& operator=(const SharedRun&) = delete;

  // Attaches `stream`, which will ask for the batches at linear positions
  // [start, end), `window` at most at once, with fair-share `weight`. False
  // if the run no longer holds `start`, has failed, or its buffers cannot
  // lend another `window` (attached windows add up to at most kMaxStreams
  // times the window the run was made for), or the window is not below its
  // capacity.
  bool Attach(const std::shared_ptr<Stream>& stream, uint64_t start,
              uint64_t end, uint32_t window, double weight);

  // `stream` asks for the batch at linear position `pos`, to fill its
  // batch `seq`. The run answers with stream->Deliver(seq, batch, ...) from
  // a worker thread, never within this call, whose caller may hold a lock
  // that the stream's ready callback takes. A stream the run has detached
  // gets stream->DetachFromRun(), which may come within this call: it takes
  // only the stream's own lock and hands the batch to the pool.
  void Request(Stream* stream, uint64_t seq, uint64_t pos);

  // `stream` leaves (it ended, was cancelled, or is being destroyed).
  void Leave(Stream* stream);

 private:
  struct Sub {
    std::weak_ptr<Stream> stream;
    double weight = 1.0;
    uint32_t window = 0;
    uint64_t requested_upto = 0;           // One past the highest asked.
    uint64_t end = 0;                      // One past the last it will ask.
    std::map<uint64_t, uint64_t> pending;  // pos -> seq, not yet delivered.
    // The oldest position it still needs, or the maximum if none.
    uint64_t NextNeeded() const {
      if (!pending.empty()) return pending.begin()->first;
      return requested_upto < end ? requested_upto
                                  : std::numeric_limits<uint64_t>::max();
    }
    bool Needs(uint64_t pos) const {
      return pending.count(pos) != 0 || (pos >= requested_upto && pos < end);
    }
  };
  struct Slot {
    std::shared_ptr<const ReadyBatch> batch;  // Null while being built.
    uint32_t deliveries = 0;
  };
  struct Delivery {
    std::weak_ptr<Stream> stream;
    uint64_t seq = 0;
    std::shared_ptr<const ReadyBatch> batch;
    absl::Status error;  // Set when the run failed at or before this batch.
    bool shared = false;
  };
  // What one pass of Process() does outside the lock.
  struct Work {
    std::vector<Delivery> deliveries;
    std::vector<std::weak_ptr<Stream>> detached;
  };

  SharedRun(std::shared_ptr<Stream> producer, uint64_t start, uint32_t capacity,
            uint32_t window, std::shared_ptr<PoolGroup> group,
            std::shared_ptr<BufferSource> memory);

  // Takes finished batches from the producer, serves what streams asked
  // for, drops what nobody needs, detaches laggards and starts new builds,
  // until nothing changes.
  void Process();
  // Runs Process() on a worker, once for any number of calls before it runs.
  void Schedule();
  void CollectLocked(Work* work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ServeLocked(Sub& sub, Stream* key, Work* work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest batch if it is built and no attached stream needs it.
  bool DropOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateWeightLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A buffer to build in, or null (and starved_ set) while streams hold
  // every one.
  std::unique_ptr<BatchBuffer> TakeBuffer();
  // A batch's last holder let it go.
  void ReturnBuffer(std::unique_ptr<BatchBuffer> buffer);

  const std::shared_ptr<Stream> producer_;
  const uint32_t capacity_;
  const uint32_t lend_limit_;  // kMaxStreams times the run's window.
  const std::shared_ptr<PoolGroup> group_;
  const std::shared_ptr<BufferSource> memory_;
  std::atomic<bool> scheduled_{false};
  std::atomic<bool> starved_{false};

  absl::Mutex mu_;
  uint64_t base_ ABSL_GUARDED_BY(mu_);       // Position of slots_.front().
  uint64_t next_build_ ABSL_GUARDED_BY(mu_); // base_ + slots_.size().
  std::deque<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::map<Stream*, Sub> subs_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  uint64_t failed_at_ ABSL_GUARDED_BY(mu_) = 0;

  // Buffers come back from batches that no stream holds any more; guarded
  // apart from mu_ because a batch may be let go under it.
  absl::Mutex free_mu_;
  std::vector<std::unique_ptr<BatchBuffer>> free_ ABSL_GUARDED_BY(free_mu_);
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_SHARED_RUN_H_
