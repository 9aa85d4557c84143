// StreamService: admits, opens and tracks streams. It takes StreamSpecs and
// returns streams and Status, and includes nothing of a transport. What
// the transport decides reaches it as plain values: whether the client
// holds batches in the transport's memory (StreamSpec::client_holds, which
// widens the window: StreamSession::Window), whether images are formatted
// on delivery (StreamSpec::raw), the encoding of batches sent in messages
// (StreamSpec::compression, which a shared run's batches never get), and
// the memory a shared run's buffers come from (ServiceOptions::run_memory).
//
// Open() checks every bound of a request (batch size, prefetch depth, bytes
// per batch), then asks the Admission (admission.h) for the stream's memory,
// its stream and peer counts and its place in its job, waiting up to the
// request's deadline. A stream with `share` joins, or starts, a SharedRun
// (shared_run.h) for its plan.
//
// Thread-safe.
#ifndef STOKER_SERVER_SERVICE_STREAM_SERVICE_H_
#define STOKER_SERVER_SERVICE_STREAM_SERVICE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/catalog.h"
#include "server/service/shared_run.h"
#include "server/service/staging_wait.h"
#include "server/service/stream.h"

namespace stoker::service {

struct ServiceOptions {
  uint32_t max_batch_size = 4096;
  uint32_t max_prefetch = 64;
  uint32_t default_prefetch = 4;
  // prefetch: auto. When set, the depth of a stream that asks for none is
  // read from here at open (the autotuner writes it) instead of
  // default_prefetch. Must outlive the service.
  const std::atomic<uint32_t>* tuned_prefetch = nullptr;
  uint32_t max_streams = 256;
  uint32_t max_streams_per_peer = 64;
  uint64_t max_batch_bytes = 1ull << 30;
  uint64_t memory_budget = 2ull << 30;
  // How long an open may wait for budget, or for its rank's old stream to
  // end, at most (the call's deadline may be sooner).
  double admission_wait_seconds = 30;
  // Batches a consumer of a shared run may lag behind the fastest before
  // it is detached onto a run of its own.
  uint32_t share_lag_window = 8;
  // Makes the buffers of a shared run (a transport's run memory); unset:
  // heap buffers, which an shm stream can only take a copy of.
  BufferSourceFactory run_memory;
  OnCorrupt on_corrupt = OnCorrupt::kSkip;
  // Where streams may have helpers build chunks of their batches; null:
  // every batch is built here. Outlives the service.
  ChunkPlacer* placer = nullptr;
  // Asked about a dataset the catalog lacks (staging_wait.h); empty: none
  // is ever staged.
  StagingLookup staging;
};

struct OpenedStream {
  std::shared_ptr<Stream> stream;
  std::shared_ptr<StreamTicket> ticket;  // Shared by the stream's buffers.
  uint32_t prefetch = 0;                 // The prefetch depth granted.
  // Batches unacknowledged at most, and buffers the transport may hold:
  // prefetch, plus the consumer's held batches where it holds them.
  uint32_t window = 0;
  size_t batch_bytes = 0;
  bool shared = false;  // Joined a shared run.
  // Why a stream that asked to share builds its own batches, or empty.
  std::string share_refused;
  // The buffers of the run it joined, which lends it its batches.
  std::shared_ptr<BufferSource> run_memory;
  // For a stream that sends the uint8 rendering (StreamSpec::raw): its
  // pipeline bound in full, which says what the format stage writes
  // (BoundPipeline::FormatRendered).
  std::shared_ptr<const pipeline::BoundPipeline> formatted;
};

// An open that passed every check of its request and waits for admission
// (Prepare, then TryAdmit until granted, then Complete). Move-only.
struct PendingOpen {
  StreamSpec spec;  // With the prefetch depth granted.
  std::shared_ptr<const Catalog> catalog;
  const dataset::Dataset* dataset = nullptr;     // Owned by catalog.
  const pipeline::Pipeline* pipeline = nullptr;  // Owned by catalog.
  std::unique_ptr<pipeline::BoundPipeline> bound;
  std::shared_ptr<const pipeline::BoundPipeline> formatted;  // When raw.
  std::optional<dataset::Sampler> sampler;
  uint32_t window = 0;
  uint64_t batch_bytes = 0;
  AdmitRequest request;
  // How long admission may wait: the caller's deadline, and at most
  // admission_wait_seconds from Prepare.
  absl::Time deadline;
};

// What the metrics layer sees of one open stream.
struct StreamSnapshot {
  uint64_t id = 0;
  StreamSpec spec;
  uint64_t steps_per_epoch = 0;
  StreamStats stats;
};

// Told of each stream's open and close, one call each (stokerd logs them).
// OnOpen runs on the opening thread after admission; OnClose on whichever
// thread lets go of the stream last, once no task of it is left, with its
// final counts. No lock of the service is held; both must be quick.
class StreamObserver {
 public:
  virtual ~StreamObserver() = default;
  // `share_refused`: why a stream that asked to share builds alone, or empty.
  virtual void OnOpen(const StreamSnapshot& stream, uint64_t reserved_bytes,
                      std::string_view share_refused) = 0;
  virtual void OnClose(const StreamSnapshot& stream, const absl::Status& status,
                       double seconds_open) = 0;
};

class StreamService {
 public:
  // `pool` must outlive the service and every stream it opens.
  StreamService(pipeline::WorkerPool* pool, ServiceOptions options,
                std::shared_ptr<const Catalog> catalog);

  std::shared_ptr<const Catalog> catalog() const;
  const ServiceOptions& options() const { return options_; }
  void SetCatalog(std::shared_ptr<const Catalog> catalog);

  // NotFound for an unknown dataset or pipeline; InvalidArgument naming the
  // field or bound a request breaks; ResourceExhausted naming the budget or
  // stream limit; FailedPrecondition naming the field on which the stream
  // disagrees with its job; Unavailable once shutting down. Waits for
  // budget or its rank until `wait.deadline`, and at most
  // admission_wait_seconds.
  //
  // Open() is Prepare, Admission::Admit (which waits on this thread), and
  // Complete; the Opener (opener.h) runs the same steps without a thread
  // per waiting open.
  absl::StatusOr<OpenedStream> Open(const StreamSpec& spec,
                                    const WaitContext& wait = {});

  // The checks of Open() that come before admission; no wait. `deadline`
  // is the caller's.
  absl::StatusOr<PendingOpen> Prepare(const StreamSpec& spec,
                                      absl::Time deadline) const;
  // One try at admission (see Admission::TryAdmit): `*waiting` says whether
  // the open is counted as waiting, before and after.
  absl::StatusOr<std::shared_ptr<StreamTicket>> TryAdmit(
      const PendingOpen& open, bool* waiting);
  // An open counted as waiting gives up (deadline, cancel).
  void StopWaiting(const PendingOpen& open);
  // Called, under admission's lock, whenever memory or a stream is freed
  // or admission shuts down: when a waiting open may get in. Must be quick
  // and take no lock that is held while calling into the service.
  void SetAdmissionListener(std::function<void()> listener);
  // Builds the admitted stream: joins or starts its shared run, registers
  // it, tells the observer.
  absl::StatusOr<OpenedStream> Complete(PendingOpen pending,
                                        std::shared_ptr<StreamTicket> ticket);

  // Job weights from the config (see Admission::SetJobWeights).
  void SetJobWeights(std::map<std::string, double> weights);

  // Refuses new streams and ends the open ones with Unavailable, so clients
  // reconnect at their position once the daemon is back.
  void Shutdown();

  // A dataset of the current catalog, the shards found damaged in it
  // (none while it is healthy), and, for one served while staging, what
  // its reads from the source came to.
  struct DatasetHealth {
    std::string dataset;
    std::vector<dataset::ShardDamage> damage;
    std::optional<dataset::RemoteReadStats> source;
  };
  // Admission's figures, the shared runs alive, and the datasets' health.
  struct Stats : Admission::Stats {
    uint32_t shared_runs = 0;
    // Streams that asked to share and built alone (no budget for a run).
    uint64_t share_fallbacks = 0;
    std::vector<DatasetHealth> datasets;  // In name order.
  };
  Stats GetStats() const;
  // Every open stream, in the order they opened.
  std::vector<StreamSnapshot> Snapshot() const;
  // The cumulative counters of every label set seen since start.
  std::vector<std::pair<CounterKey, std::shared_ptr<const StreamCounters>>>
  Counters() const;
  // `observer` (or nullptr) must outlive every stream opened after this.
  void SetObserver(StreamObserver* observer) { observer_ = observer; }
  // Counts a stream or request that ended with this status.
  void RecordError(absl::StatusCode code);
  // Errors by status code since start (index: absl::StatusCode).
  std::array<int64_t, 17> Errors() const;

 private:
  static constexpr size_t kMaxCounterKeys = 1024;
  // The longest dataset, pipeline or job name a request may carry.
  static constexpr size_t kMaxNameBytes = 256;

  // What streams must agree on to share a run.
  struct RunKey {
    const Catalog* catalog;
    std::string dataset, pipeline;
    uint64_t seed;
    uint32_t batch_size, world_size, rank;
    bool drop_last;
    uint32_t ra_reps;
    bool raw;
    bool operator<(const RunKey& o) const {
      return std::tie(catalog, dataset, pipeline, seed, batch_size, world_size,
                      rank, drop_last, ra_reps, raw) <
             std::tie(o.catalog, o.dataset, o.pipeline, o.seed, o.batch_size,
                      o.world_size, o.rank, o.drop_last, o.ra_reps, o.raw);
    }
  };

  absl::Status Validate(const StreamSpec& spec) const;
  std::shared_ptr<StreamCounters> CountersFor(const StreamSpec& spec);
  // Attaches `stream` to a run for its plan, starting one if none holds its
  // position, and returns the run's buffers. If the budget has no room for
  // a new run's buffers: the reason (the stream builds alone).
  absl::StatusOr<std::shared_ptr<BufferSource>> JoinRun(
      const std::shared_ptr<Stream>& stream, Stream::Options producer,
      const OpenedStream& opened, uint64_t batch_bytes);

  // Constant after construction.
  pipeline::WorkerPool* const pool_;
  const ServiceOptions options_;
  const std::shared_ptr<Admission> admission_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::weak_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::map<RunKey, std::vector<std::weak_ptr<SharedRun>>> runs_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Catalog> catalog_ ABSL_GUARDED_BY(mu_);
  std::map<CounterKey, std::shared_ptr<StreamCounters>> counters_
      ABSL_GUARDED_BY(mu_);
  std::array<int64_t, 17> errors_ ABSL_GUARDED_BY(mu_){};
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t share_fallbacks_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<StreamObserver*> observer_{nullptr};
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_SERVICE_H_
