// Helpers for the offline tools (pack, verify) that run one job over many
// items on a few threads. The daemon never uses them: it has its worker pool.
//
// Thread-safe: ParallelFor may be called from any thread; ProgressCounter
// may be updated from many.
#ifndef STOKER_SERVER_DATASET_PARALLEL_H_
#define STOKER_SERVER_DATASET_PARALLEL_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker::dataset {

// How far a pack or verify has got, for a progress display. `phase` names
// the current pass ("scan", "write", "verify") and points to a literal.
struct PackProgress {
  uint64_t done = 0;
  uint64_t total = 0;
  uint64_t bytes = 0;
  std::string_view phase;
};

// The thread count `threads` asks for: itself if positive, else one per core.
int ResolveThreads(int threads);

// Calls fn(i) for every i in [0, n) on min(threads, n) threads (or on the
// caller's thread when that is 1) and returns when all calls have. Items are
// handed out in increasing order. fn must be safe to call concurrently.
void ParallelFor(int threads, uint64_t n,
                 const std::function<void(uint64_t)>& fn);

// Counts finished items and bytes, and reports each change to a callback,
// one call at a time.
class ProgressCounter {
 public:
  // `callback` may be empty. REQUIRES: it outlives the counter.
  ProgressCounter(const std::function<void(const PackProgress&)>& callback,
                  std::string_view phase, uint64_t total);

  void Add(uint64_t items, uint64_t bytes);

 private:
  const std::function<void(const PackProgress&)>& callback_;
  absl::Mutex mu_;
  PackProgress progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_PARALLEL_H_
