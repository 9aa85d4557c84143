// StreamService: admits, opens and tracks the daemon's streams. It takes
// StreamSpecs and returns streams and Status, and includes nothing of a
// transport: what a transport decides reaches it as plain values in the
// spec (client_holds, raw) and in ServiceOptions::run_memory. (The wire
// encoding a request asks for is its delivery's: Stream::SetEncoder.)
//
// An open is three steps, which the Opener (opener.h) runs without a
// thread per waiting open, and Open() runs on the caller's thread:
//   Prepare   PlanOpen (open_planner.h): the request checked against the
//             catalog and its bounds, the pipeline bound, the Stream::Options
//             filled; no wait, nothing reserved.
//   TryAdmit  Admission (admission.h): the stream's memory, its stream and
//             peer counts and its place in its job; an open may wait for
//             them until its deadline.
//   Complete  builds the Stream, joins or starts its shared run
//             (SharedRuns, shared_runs.h) when it asked to share, registers
//             it and tells the observer.
// The counts across streams (label sets, errors, share fallbacks) are a
// ServiceCounters (service_counters.h).
//
// Thread-safe. One lock guards the catalog, the open streams and the
// shutdown flag; no call into a stream, run or observer is made under it.
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
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/catalog.h"
#include "server/service/open_planner.h"
#include "server/service/service_counters.h"
#include "server/service/shared_runs.h"
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
// (Prepare, then TryAdmit until granted, then Complete, which consumes it).
struct PendingOpen {
  OpenPlan plan;
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

  using DatasetHealth = service::DatasetHealth;
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
  Counters() const { return counts_.All(); }
  // `observer` (or nullptr) must outlive every stream opened after this.
  void SetObserver(StreamObserver* observer) { observer_ = observer; }
  // Counts a stream or request that ended with this status.
  void RecordError(absl::StatusCode code) { counts_.RecordError(code); }
  // Errors by status code since start (index: absl::StatusCode).
  std::array<int64_t, 17> Errors() const { return counts_.Errors(); }

 private:
  // Constant after construction.
  pipeline::WorkerPool* const pool_;
  const ServiceOptions options_;
  const std::shared_ptr<Admission> admission_;
  SharedRuns runs_;         // Thread-safe on its own.
  ServiceCounters counts_;  // Thread-safe on its own.

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::weak_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Catalog> catalog_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<StreamObserver*> observer_{nullptr};
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_SERVICE_H_
