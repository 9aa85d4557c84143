// SharedRuns: the registry of the shared preprocessing runs (shared_run.h)
// alive, by what their streams must agree on (the catalog, dataset,
// pipeline, seed, batch size, world size, rank, drop_last, ra_reps, raw).
// Join attaches a stream that asked to share to a run of its plan that
// still holds its start, or starts one: it reserves the run's buffers
// against the memory budget, makes them (the transport's run memory, or
// heap), and builds the run's producer from the stream's own options.
//
// Thread-safe: one lock, held while a run is looked up or started; under it
// go SharedRun::Attach, Admission::Reserve, the run memory's factory and
// Stream::AttachRun, none of which calls back into the registry.
#ifndef STOKER_SERVER_SERVICE_SHARED_RUNS_H_
#define STOKER_SERVER_SERVICE_SHARED_RUNS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/batch.h"
#include "server/service/shared_run.h"
#include "server/service/stream.h"

namespace stoker::service {

class SharedRuns {
 public:
  // `pool` and `admission` outlive the registry and every run. A run keeps
  // `lag_window` batches beyond a stream's window (ServiceOptions::
  // share_lag_window). `memory` makes a run's buffers; unset: heap.
  SharedRuns(pipeline::WorkerPool* pool, Admission* admission,
             uint32_t lag_window, BufferSourceFactory memory);

  // Attaches `stream` (REQUIRES: it asked to share and has not started) to
  // a run of its plan, starting one from `options` (the stream's own:
  // the producer is built from a copy) if none holds its start; returns
  // the run's buffers. `window` is the stream's, `weight` its job's. An
  // error says why it builds alone: the budget has no room for a new run.
  absl::StatusOr<std::shared_ptr<BufferSource>> Join(
      const std::shared_ptr<Stream>& stream, const Stream::Options& options,
      uint32_t window, double weight, uint64_t batch_bytes);

  // Runs alive now.
  uint32_t alive() const;

 private:
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

  // Constant after construction.
  pipeline::WorkerPool* const pool_;
  Admission* const admission_;
  const uint32_t lag_window_;
  const BufferSourceFactory memory_;

  mutable absl::Mutex mu_;
  std::map<RunKey, std::vector<std::weak_ptr<SharedRun>>> runs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_SHARED_RUNS_H_
