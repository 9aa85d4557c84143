// Fetches ahead, from a stream's plan, the records of a dataset that is
// served while it is staged (dataset.h, OpenStaging).
//
// Every batch is a pure function of the plan (the sampler) and its linear
// position, so when a stream starts building position p it also knows the
// records of positions p + 1 .. p + depth. Ahead(p) asks the dataset to
// fetch those of positions [p, p + depth] it has not asked for yet, a
// position at a time and in order (Dataset::Prefetch coalesces the records
// of one call into ranged GETs, run in the order asked, in parallel; a read
// of a record whose fetch is in flight waits for it), so that the records
// of the batch built next arrive first. On a dataset
// whose shards are all local, Ahead returns after one atomic load.
//
// Thread-safe.
#ifndef STOKER_SERVER_SERVICE_PLAN_PREFETCH_H_
#define STOKER_SERVER_SERVICE_PLAN_PREFETCH_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/dataset.h"
#include "server/dataset/sampler.h"

namespace stoker::service {

class PlanPrefetcher {
 public:
  // `dataset` outlives this object. `sampler` is a copy of the stream's;
  // `end` is the linear position the stream stops before; `depth` batches
  // are fetched ahead of the one being built (storage.read_ahead).
  PlanPrefetcher(const dataset::Dataset* dataset, dataset::Sampler sampler,
                 uint64_t end, uint64_t depth);

  // The stream is starting to build linear position `pos`.
  void Ahead(uint64_t pos);

  // Positions from the one being built that are fetched as urgent.
  static constexpr uint64_t kUrgent = 2;

 private:
  const dataset::Dataset* const dataset_;
  const uint64_t steps_per_epoch_;
  const uint64_t end_;
  const uint64_t depth_;

  absl::Mutex mu_;
  dataset::Sampler sampler_ ABSL_GUARDED_BY(mu_);
  // Positions below this were asked for.
  uint64_t asked_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_PLAN_PREFETCH_H_
