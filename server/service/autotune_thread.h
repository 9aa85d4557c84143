// AutotuneThread: runs the Autotuner (autotuner.h) on stokerd's live
// figures. Every period it reads the worker pool's busy time, the stream
// service's cumulative counters (samples delivered, consumer wait and busy
// time from acks) and the machine's CPU use from /proc, turns the deltas into
// one AutotuneMeasurement, and applies the decision: the pool's active thread
// count, and the default prefetch depth that the service grants to streams
// opened afterwards.
//
// Thread-safe. Owns one thread, started by Start() and stopped by the
// idempotent Stop() (the destructor calls it).
#ifndef STOKER_SERVER_SERVICE_AUTOTUNE_THREAD_H_
#define STOKER_SERVER_SERVICE_AUTOTUNE_THREAD_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/autotuner.h"
#include "server/service/stream_service.h"

namespace stoker::service {

// What the tuner chose, for metrics and logs.
struct AutotuneState {
  bool workers_auto = false;
  bool prefetch_auto = false;
  int workers = 0;        // Active worker threads now.
  uint32_t prefetch = 0;  // Default depth granted to new streams now.
  int64_t changes = 0;    // Decisions that changed either figure.
  std::string reason;     // Why the last change was made.
};

class AutotuneThread {
 public:
  // `pool` and `service` must outlive this object; `prefetch` too, and the
  // service reads it (ServiceOptions::tuned_prefetch).
  AutotuneThread(AutotuneLimits limits, pipeline::WorkerPool* pool,
                 const StreamService* service, std::atomic<uint32_t>* prefetch,
                 absl::Duration period);
  ~AutotuneThread();
  AutotuneThread(const AutotuneThread&) = delete;
  AutotuneThread& operator=(const AutotuneThread&) = delete;

  void Start();
  void Stop();  // Idempotent.

  AutotuneState state() const;

 private:
  struct Totals {
    double wall = 0;
    int64_t samples = 0;
    double pool_busy = 0;
    double wait = 0;
    double consumer_busy = 0;
    int64_t acks = 0;
    double machine_busy = -1;  // CPU seconds of every process; -1 unknown.
    double self_cpu = -1;      // CPU seconds of this process; -1 unknown.
  };
  Totals Read() const;
  void Loop();

  // Constant after construction.
  pipeline::WorkerPool* const pool_;
  const StreamService* const service_;
  std::atomic<uint32_t>* const prefetch_;
  const absl::Duration period_;

  mutable absl::Mutex mu_;
  Autotuner tuner_ ABSL_GUARDED_BY(mu_);
  AutotuneState state_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Touched only by Start/Stop.
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_AUTOTUNE_THREAD_H_
