// Stream: one client stream's batches, as an ordered window over the
// sources that fill them. Of its transport it knows only what StreamSpec
// says (the name for metrics, whether the client holds batches, whether
// images go out unformatted) and, where batch bytes travel in messages, the
// delivery's BatchEncoder (batch_encoder.h), which it runs on the worker
// that finished a batch.
//
// The window. Its StreamSession (stream_session.h), driven by the
// transport's adapter, hands it an empty buffer with Fill() whenever the
// session's window has room, and takes finished batches with TakeReady(),
// strictly in (epoch, step) order. Each Fill starts the next position: a
// StreamSlot (stream_slot.h) keyed by its sequence number, whose bytes come
// from exactly one source at a time:
//   - TaskSource (task_source.h): the stream's own tasks on the worker pool;
//     the default, and the fallback of the other two;
//   - RunSource (run_source.h): a SharedRun the stream joined (share: true),
//     which builds each batch once and lends it (Deliver); if the run
//     detaches the stream for lagging, the stream builds the batches it
//     still waits for, and all later ones, on its tasks;
//   - ChunkSource (chunk_source.h): chunks of consecutive positions that a
//     ChunkPlacer placed on helper daemons, filled by the helper's copies
//     (TakeRemote); when a chunk ends early (ChunkEnded), the stream builds
//     what it did not deliver. A stream on a shared run, and a stream a node
//     opened on this daemon as its helper (job id "helper:..."), place none.
// Where the stream is in its plan is one cursor (NextPositionLocked): the
// sampler and the next (epoch, step). Every position it will start is read
// from there, in order.
//
// What it owns: the window (slots, cursor, status), its TaskSource and
// ChunkSource, the link to its run, and the counting of what it hands out
// (Count::kSamples, kBatches, ... into its label set's counters). The
// placer's ack window (the stall share of the last second) is the
// ChunkSource's, fed by RecordAck. A sample that cannot be used is skipped
// or ends the stream (TaskSource says how); a stream that failed hands out
// the batches before the failure, then nothing.
//
// Thread-safe. One lock (mu_) guards the window and the sources' mutable
// state; it is never held while calling into the pool, the run or the
// callback, and is held around the placer's chunk_steps and Place, which
// must not call back into the stream. The ready
// callback runs on a worker thread whenever a batch finishes or the stream
// fails; it must not block. After Cancel() returns, the callback never runs
// again. Tasks hold a shared_ptr to the stream, so it lives until the last
// of them has run.
#ifndef STOKER_SERVER_SERVICE_STREAM_H_
#define STOKER_SERVER_SERVICE_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/base/clock.h"
#include "server/dataset/dataset.h"
#include "server/dataset/sampler.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/batch.h"
#include "server/service/batch_encoder.h"
#include "server/service/catalog.h"
#include "server/service/chunk_source.h"
#include "server/service/counters.h"
#include "server/service/plan_prefetch.h"
#include "server/service/remote_source.h"
#include "server/service/run_source.h"
#include "server/service/stream_session.h"
#include "server/service/stream_slot.h"
#include "server/service/stream_spec.h"
#include "server/service/task_source.h"

namespace stoker::service {

class SharedRun;

// What one stream did since it opened, and what it holds now.
struct StreamStats {
  CountValues counts;  // Since it opened (counters.h).
  int queued = 0;      // Finished batches not yet taken.
  int building = 0;         // Batches being built.
  bool sharing = false;     // Attached to a shared run now.
};

class Stream : public BatchSource,
               public ChunkSink,
               public SlotOwner,
               public std::enable_shared_from_this<Stream> {
 public:
  struct Options {
    StreamSpec spec;
    // Keeps the dataset and pipeline alive for the stream's life.
    std::shared_ptr<const Catalog> catalog;
    const dataset::Dataset* dataset = nullptr;  // Owned by catalog.
    // Shared with a shared run's producer, which runs the same binding
    // (BoundPipeline is immutable and safe to run from many threads).
    std::shared_ptr<const pipeline::BoundPipeline> pipeline;
    std::optional<dataset::Sampler> sampler;  // Required.
    pipeline::WorkerPool* pool = nullptr;  // Outlives every stream.
    std::shared_ptr<PoolGroup> group;      // Where its tasks run.
    OnCorrupt on_corrupt = OnCorrupt::kSkip;
    // Of the stream's label set, shared with the other streams of the same
    // labels and the metrics.
    std::shared_ptr<StreamCounters> counters;
    // False for a shared run's producer: the streams it serves count what
    // they deliver; its own counts are in no label set, and it adds only
    // stage latencies to `counters`.
    bool count_deliveries = true;
    // Where chunks of batches may be built by helpers; null: all here.
    // Outlives every stream.
    ChunkPlacer* placer = nullptr;
    // The clock of the placer's ack window (RecordAck): steady nanoseconds.
    // Tests set a clock of their own.
    int64_t (*now_ns)() = &NowNs;
  };

  explicit Stream(Options options);
  ~Stream() override;

  const StreamSpec& spec() const { return spec_; }
  const BatchLayout& layout() const { return layout_; }
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  uint64_t samples_per_epoch() const { return samples_per_epoch_; }
  uint64_t num_samples() const { return dataset_->num_samples(); }

  void SetReadyCallback(std::function<void()> callback);
  // The delivery's wire encoding of the batches this stream builds itself;
  // null: none. REQUIRES: before the first Fill().
  void SetEncoder(std::shared_ptr<const BatchEncoder> encoder);

  // Starts the next batch in `buffer` (capacity >= layout().Capacity()).
  // Returns false, dropping the buffer, when no batch is left to start or
  // the stream has failed or been cancelled.
  bool Fill(std::unique_ptr<BatchBuffer> buffer) override;

  // True while Fill() should be given a buffer: a batch is left to start
  // and, on a stream that builds on its own tasks (no shared run, no
  // helpers), fewer batches are being built than keep the workers busy
  // (kBuildAhead below). Batches that wait in the window need a buffer
  // only once they are started, so a consumer that takes each batch as it
  // is finished leaves the rest of its window untouched: a shm ring's
  // unused slots cost no memory (docs/performance.md, "Memory of many
  // trainers").
  bool HasMore() override;

  // The next batch in order, once it is finished.
  std::optional<ReadyBatch> TakeReady() override;

  // True when every batch was taken, or the stream failed (see status()).
  bool Done() override;
  absl::Status status() override;

  // Ends the stream with `status` (e.g. Unavailable at shutdown): no batch
  // starts or is handed out after it, and Done() is true. Runs the callback.
  void Fail(absl::Status status);

  // Drops all pending work and leaves its shared run. Idempotent. A
  // `reason` that is not OK becomes status() unless the stream failed
  // first: why it closed early (e.g. Cancelled: the client left).
  void Cancel(absl::Status reason = absl::OkStatus());

  // Makes the stream take its batches from `run`, which has attached it:
  // lent for linear positions below `lend_before`, copied from there on.
  // Call before the first Fill().
  void AttachRun(std::shared_ptr<SharedRun> run, uint64_t lend_before);
  // From the run: the batch for `seq` is `batch`, or the run failed there
  // with `error`.
  void Deliver(uint64_t seq, std::shared_ptr<const ReadyBatch> batch,
               bool shared, const absl::Status& error);
  // From the run: build every batch still waited for, and all later ones,
  // on this stream's own tasks.
  void DetachFromRun();
  // Tasks not yet run skip their work; unlike Cancel(), safe to call from
  // within the ready callback.
  void StopWork() { cancelled_ = true; }

  // The consumer acknowledged a batch, having waited `wait_seconds` for it
  // after `busy_seconds` of its own work.
  void RecordAck(double wait_seconds, double busy_seconds);
  // The transport took `nanoseconds` to hand a batch over.
  void RecordTransfer(int64_t nanoseconds);

  // ChunkSink.
  absl::Status TakeRemote(uint64_t chunk, uint64_t pos,
                          const RemoteBatch& batch,
                          TakeReport* report) override;
  void ChunkEnded(uint64_t chunk) override;

  // SlotOwner, for its TaskSource.
  bool cancelled() const override { return cancelled_; }
  Counts& counts() override { return *counts_; }
  void TasksDone(StreamSlot* slot) override;

  StreamStats stats() const;

 private:
  // Batches a stream builds at once on its own tasks, at least: the one
  // being finished and the next, so that workers never wait between two.
  // More while they hold fewer than kBuildAheadPerWorker samples for each
  // of the pool's active workers (small batches, many workers).
  static constexpr uint32_t kBuildAhead = 2;
  static constexpr uint32_t kBuildAheadPerWorker = 2;

  // The cursor: sets `slot`'s position and samples to the next ones of the
  // plan and moves on. The one place the stream reads its plan.
  void NextPositionLocked(StreamSlot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether enough batches are building on tasks for `workers` active
  // workers (see HasMore).
  bool BuildingEnoughLocked(int workers) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AtEndLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `slots`, just given to the tasks (building_tasks_ counts them),
  // to the TaskSource.
  void StartOnTasks(const std::vector<StreamSlot*>& slots);
  // Sets decoded_bytes, and runs the encoder on slot->delivered.
  void Encode(StreamSlot* slot);
  void NotifyReady();
  // Counts a batch handed to the transport.
  void CountDelivered(const ReadyBatch& ready);

  // Constant after construction.
  const StreamSpec spec_;
  const std::shared_ptr<const Catalog> catalog_;
  const dataset::Dataset* const dataset_;
  const BatchLayout layout_;
  const uint64_t steps_per_epoch_;
  const uint64_t samples_per_epoch_;
  const uint64_t end_;    // EndPosition(spec_, steps_per_epoch_).
  const uint64_t start_;  // Linear position of the first batch.
  int64_t (*const now_ns_)();
  const std::shared_ptr<StreamCounters> counters_;
  // This stream's counts: part of counters_' label set, or of none.
  const std::shared_ptr<Counts> counts_;
  const TaskSource tasks_;
  // Set when the dataset is staging at open: fetches the records of the
  // batches ahead from its source.
  const std::unique_ptr<PlanPrefetcher> prefetch_;
  // Engaged when the stream may place chunks; its state is guarded by mu_.
  std::optional<ChunkSource> chunks_;

  // Set once before the first Fill, read by the workers after it.
  std::shared_ptr<const BatchEncoder> encoder_;

  std::atomic<bool> cancelled_{false};

  // Guards the callback; held shared while it runs, exclusively to clear it.
  absl::Mutex callback_mu_;
  std::function<void()> callback_ ABSL_GUARDED_BY(callback_mu_);

  mutable absl::Mutex mu_;
  dataset::Sampler sampler_ ABSL_GUARDED_BY(mu_);
  uint64_t next_epoch_ ABSL_GUARDED_BY(mu_);
  uint64_t next_step_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t deliver_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The window: every slot started and not yet taken, by sequence number.
  std::map<uint64_t, std::unique_ptr<StreamSlot>> slots_ ABSL_GUARDED_BY(mu_);
  // Slots whose samples were handed to the tasks and are not all done.
  uint32_t building_tasks_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<RunSource> run_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_H_
