// WorkerPool: the fixed set of threads that runs every stream's sample tasks.
//
// Tasks are submitted to groups (one per job). Workers pick the next task by
// weighted fair share across the groups that have work (stride scheduling):
// each group carries a virtual time that advances by 1/weight per task run,
// and the group with the smallest virtual time goes next. A group that was
// idle re-enters at the current minimum, so idling banks no credit. A
// consumer that stalls submits nothing and therefore holds no worker.
//
// The pool starts num_threads threads, but only the first active_threads()
// of them take tasks; the others park until SetActiveThreads() wakes them.
// The autotuner (server/service/autotuner.h) moves that number as the
// consumers' rate and the free cores change, without starting or joining
// threads on the hot path.
//
// Thread-safe. Threads start in Start() and stop in Stop(), which runs every
// task already queued before it returns (tasks own resources they must
// release; parked threads help drain the queue); the destructor calls Stop().
#ifndef STOKER_SERVER_PIPELINE_WORKER_POOL_H_
#define STOKER_SERVER_PIPELINE_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker::pipeline {

class WorkerPool {
 public:
  using Task = std::function<void()>;
  using GroupId = uint64_t;

  struct Stats {
    int threads = 0;
    int64_t busy_ns = 0;       // Summed over threads since Start().
    int64_t tasks_run = 0;
    size_t queued = 0;
    int active_threads = 0;    // Threads that take tasks now.
  };

  // num_threads <= 0 means one per core.
  explicit WorkerPool(int num_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Start();
  void Stop();  // Idempotent.

  // The weights a group may carry. Requests and the config are refused
  // outside this range; the pool clamps to it, so that no weight can make a
  // group's virtual time jump beyond what a double counts in steps of one.
  static constexpr double kMinWeight = 1e-3;
  static constexpr double kMaxWeight = 1e6;

  // Groups carry the fair-share weight; weight <= 0 is taken as 1, others
  // are clamped to [kMinWeight, kMaxWeight].
  GroupId AddGroup(double weight);
  void SetWeight(GroupId group, double weight);
  // Queued tasks of the group still run; the group disappears once empty.
  void RemoveGroup(GroupId group);

  // REQUIRES: group was returned by AddGroup and not removed.
  void Submit(GroupId group, Task task);

  int num_threads() const { return num_threads_; }
  // Lets the first `n` threads take tasks, clamped to 1..num_threads(). A
  // thread parked by a lower count finishes the task it is running first.
  void SetActiveThreads(int n);
  int active_threads() const;
  Stats GetStats() const;

 private:
  struct Group {
    double weight = 1.0;
    double pass = 0.0;  // Virtual time.
    bool removed = false;
    std::deque<Task> tasks;
  };

  void WorkerLoop(int index);
  // Moves every virtual time down by the smallest one among groups with
  // work, once that has grown large: differences are what schedule, and
  // small numbers keep them exact. Also run when a group goes, so that
  // what a group that ended did leaves no trace.
  void RebaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the next task for thread `index`, or returns false when stopping
  // with nothing queued.
  bool NextTask(int index, Task* task);

  // Constant after construction.
  const int num_threads_;

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;    // Active threads wait here for tasks.
  absl::CondVar parked_cv_;  // Threads beyond active_ wait here.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  GroupId next_group_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<GroupId, Group> groups_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  int active_ ABSL_GUARDED_BY(mu_);
  double min_pass_ ABSL_GUARDED_BY(mu_) = 0.0;
  int64_t busy_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tasks_run_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;  // Touched only by Start/Stop.
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_WORKER_POOL_H_
