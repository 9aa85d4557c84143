// Stream: builds the batches of one client stream, in order, on the shared
// worker pool. Of its transport it knows only what StreamSpec says: the
// name (for metrics), whether the client holds batches (a wider window),
// whether the images are formatted on delivery (`raw`), and how batches
// that travel in messages are encoded (`compression`: the stream
// zstd-encodes them itself).
//
// The flow control is the stream session's (stream_session.h), which the
// RPC reactor drives: it takes an empty buffer from the transport's
// delivery and hands it to the stream with Fill() whenever the window has
// room for one more batch in flight, and takes finished batches, strictly
// in (epoch, step) order, with TakeReady(). Each sample of a batch is one pool task that reads its record,
// runs the pipeline with a generator seeded by (seed, epoch, sample id), and
// writes its outputs straight to its place in the buffer. The worker that
// writes a batch's last sample finishes it (FinishBatch), then runs the
// pipeline's batch op (mixup, cutmix) with a generator seeded by (seed,
// epoch, step, rank). So a batch depends only on the request and its
// position, never on worker count or timing.
//
// A sample that cannot be read or decoded is left out of its batch and
// listed in the batch's skipped ids (OnCorrupt::kSkip), or ends the stream
// with its DataLoss status after the batches before it (OnCorrupt::kFail).
// A sample on a damaged shard (dataset::IsShardDamage) ends the stream
// under either setting.
//
// A stream that joined a SharedRun (share: true) starts no tasks of its own:
// it asks the run for each batch, and the run lends it the batch it built
// (Deliver): the ReadyBatch's buffer is a LentBatchBuffer that reads the
// run's buffer in place and holds the stream's own, unused. The last
// batches of a stream, which its client may still hold after the stream
// ends, are copied into its own buffers instead, so that nothing the run
// reuses is read after the end. If the run detaches the stream for lagging,
// it builds the batches it still waits for, and all later ones, itself.
//
// With a ChunkPlacer (remote_source.h; the code is in stream_remote.cc),
// the stream may have a helper build a chunk of consecutive batches: at
// each chunk boundary Fill asks the placer, and the batches of a chunk it
// placed are filled by the helper's copies (TakeRemote) instead of tasks.
// When a chunk ends early, the stream builds what it did not deliver
// (ChunkEnded). A stream on a shared run, and a stream a node opened on
// this daemon as its helper (job id "helper:..."), place nothing.
//
// Thread-safe. The ready callback runs on a worker thread whenever a batch
// finishes or the stream fails; it must not block. After Cancel() returns,
// the callback never runs again. Tasks hold a shared_ptr to the stream, so it
// lives until the last of them has run.
#ifndef STOKER_SERVER_SERVICE_STREAM_H_
#define STOKER_SERVER_SERVICE_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/dataset.h"
#include "server/dataset/sampler.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/batch.h"
#include "server/service/catalog.h"
#include "server/service/counters.h"
#include "server/service/plan_prefetch.h"
#include "server/service/remote_source.h"
#include "server/service/stream_session.h"

namespace stoker::service {

enum class OnCorrupt { kSkip, kFail };

class SharedRun;

// What a client asked for, as plain values.
struct StreamSpec {
  std::string dataset;
  std::string pipeline;
  uint32_t batch_size = 0;
  uint64_t seed = 0;
  uint64_t epochs = 1;  // 0: endless.
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::string job_id;
  bool drop_last = false;
  uint32_t ra_reps = 1;  // Copies of each sample per epoch (sampler.h).
  uint32_t prefetch = 0;  // 0: the daemon's default.
  uint64_t start_epoch = 0;
  uint64_t start_step = 0;
  // Stop before (end_epoch, end_step), or at the end of `epochs` if that is
  // sooner; (0, 0): at the end of `epochs`.
  uint64_t end_epoch = 0;
  uint64_t end_step = 0;
  double weight = 1.0;
  std::string transport = "grpc";  // Its name, for metrics and logs.
  // The client keeps batches in the transport's memory after reading them
  // (Transport::client_holds): the window grows by `hold`.
  bool client_holds = false;
  uint32_t hold = 0;  // Batches the consumer keeps beyond prefetch.
  bool share = false;  // Join a shared preprocessing run.
  std::string peer;    // Who opened it: "uid:N", "ip:ADDR" or "local".
  // Send the uint8 rendering, before the format stage (BindMode::kRendered):
  // a node's helper stream, or a stream whose transport formats the images
  // itself (Transport::formats_on_delivery).
  bool raw = false;
  // How the batches the stream builds itself are encoded for a transport
  // that sends them in its messages (kNone for the others). A shared run's
  // batches go as they are.
  Compression compression = Compression::kNone;
};

// The linear position (epoch * steps_per_epoch + step) a stream stops
// before: the sooner of `end` and the end of `epochs`; the largest uint64
// for an endless stream with no end.
uint64_t EndPosition(const StreamSpec& spec, uint64_t steps_per_epoch);

// What one stream did since it opened, and what it holds now.
struct StreamStats {
  CountValues counts;  // Since it opened (counters.h).
  int queued = 0;      // Finished batches not yet taken.
  int building = 0;         // Batches being built.
  bool sharing = false;     // Attached to a shared run now.
};

// True for the job id of a stream that a node opened on this daemon as its
// helper: such a stream never places chunks in turn.
bool IsHelperJob(std::string_view job_id);

class Stream : public BatchSource,
               public ChunkSink,
               public std::enable_shared_from_this<Stream> {
 public:
  struct Options {
    StreamSpec spec;
    // Keeps the dataset and pipeline alive for the stream's life.
    std::shared_ptr<const Catalog> catalog;
    const dataset::Dataset* dataset = nullptr;  // Owned by catalog.
    std::unique_ptr<pipeline::BoundPipeline> pipeline;
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
  };

  explicit Stream(Options options);
  ~Stream();

  const StreamSpec& spec() const { return spec_; }
  const BatchLayout& layout() const { return layout_; }
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  uint64_t samples_per_epoch() const { return samples_per_epoch_; }
  uint64_t num_samples() const { return dataset_->num_samples(); }

  void SetReadyCallback(std::function<void()> callback);

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

  StreamStats stats() const;

 private:
  struct Building;

  // Batches a stream builds at once on its own tasks, at least: the one
  // being finished and the next, so that workers never wait between two.
  // More while they hold fewer than kBuildAheadPerWorker samples for each
  // of the pool's active workers (small batches, many workers).
  static constexpr uint32_t kBuildAhead = 2;
  static constexpr uint32_t kBuildAheadPerWorker = 2;

  // Whether enough batches are building on tasks for `workers` active
  // workers (see HasMore).
  bool BuildingEnoughLocked(int workers) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SubmitSamples(Building* batch);
  void RunSample(Building* batch, uint32_t index);
  void FinishSample(Building* batch);
  void NotifyReady();
  // Counts a batch handed to the transport.
  void CountDelivered(const ReadyBatch& ready);
  // On the worker that wrote the batch's last sample: decides which samples
  // are kept (or the error that ends the stream) and runs FinishBatch.
  void FinishBatchOf(Building* batch);
  // Runs the pipeline's batch op on `ready`, collated in batch->buffer;
  // sets batch->run_error when it fails.
  void RunBatchOp(Building* batch, const ReadyBatch& ready);
  // Encodes batch->delivered in place as spec_.compression asks: always
  // (kZstd), or when an earlier finished batch still waits to be taken,
  // i.e. sending has fallen behind building (kAuto).
  void Encode(Building* batch);
  // Fills in how much `request`'s stream needs help: the stall share of
  // the last second of acks, and whether its window has no finished batch.
  void NeedLocked(ChunkRequest* request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AtEndLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `batch`, at linear position `pos`, part of a helper's chunk when
  // it falls in the open one or starts a new one the placer places.
  void PlaceLocked(Building* batch, uint64_t pos)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const StreamSpec spec_;
  const std::shared_ptr<const Catalog> catalog_;
  const dataset::Dataset* const dataset_;
  const std::unique_ptr<pipeline::BoundPipeline> pipeline_;
  const BatchLayout layout_;
  pipeline::WorkerPool* const pool_;
  const std::shared_ptr<PoolGroup> group_;
  const OnCorrupt on_corrupt_;
  const uint64_t steps_per_epoch_;
  const uint64_t samples_per_epoch_;
  const uint64_t end_;  // EndPosition(spec_, steps_per_epoch_).
  const uint64_t start_;  // Linear position of the first batch.
  ChunkPlacer* const placer_;  // Null when this stream places nothing.
  // Set when placer_ is; empty when the records cannot prove it, which no
  // helper matches.
  const std::string content_digest_;
  // What a helper's uint8 rendering of this stream's batches looks like;
  // set when placer_ is and the pipeline can finish one.
  const std::optional<BatchLayout> rendered_layout_;
  // Set when the dataset is staging at open: fetches the records of the
  // batches ahead from its source.
  const std::unique_ptr<PlanPrefetcher> prefetch_;

  const std::shared_ptr<StreamCounters> counters_;
  // This stream's counts: part of counters_' label set, or of none.
  const std::shared_ptr<Counts> counts_;

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
  std::shared_ptr<SharedRun> run_ ABSL_GUARDED_BY(mu_);
  uint64_t lend_before_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::unique_ptr<Building>> building_ ABSL_GUARDED_BY(mu_);
  // Batches whose samples were submitted as tasks and are not all done.
  uint32_t building_tasks_ ABSL_GUARDED_BY(mu_) = 0;
  // Open chunks by their first position; [chunk_begin_, chunk_end_) is the
  // newest chunk claimed (possibly ended since).
  std::map<uint64_t, std::shared_ptr<RemoteChunk>> chunks_
      ABSL_GUARDED_BY(mu_);
  uint64_t chunk_begin_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t chunk_end_ ABSL_GUARDED_BY(mu_) = 0;
  // The acks of the last second, for the placer: (steady ns, wait, busy).
  struct AckFigures {
    int64_t at_ns;
    double wait_seconds, busy_seconds;
  };
  std::deque<AckFigures> recent_acks_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_H_
