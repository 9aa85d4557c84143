#include "server/pipeline/worker_pool.h"

#include <algorithm>

#include "server/base/clock.h"

namespace stoker::pipeline {
namespace {

// Past this, virtual times are moved back towards zero (RebaseLocked).
constexpr double kRebaseAt = 1e9;

double ClampWeight(double weight) {
  if (!(weight > 0)) return 1.0;  // Also NaN.
  return std::clamp(weight, WorkerPool::kMinWeight, WorkerPool::kMaxWeight);
}

}  // namespace

WorkerPool::WorkerPool(int num_threads)
    : num_threads_(num_threads > 0
                       ? num_threads
                       : std::max(1u, std::thread::hardware_concurrency())),
      active_(num_threads_) {}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  for (int i = 0; i < num_threads_; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

void WorkerPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    work_cv_.SignalAll();
    parked_cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

WorkerPool::GroupId WorkerPool::AddGroup(double weight) {
  absl::MutexLock lock(&mu_);
  const GroupId id = next_group_++;
  Group& g = groups_[id];
  g.weight = ClampWeight(weight);
  g.pass = min_pass_;
  return id;
}

void WorkerPool::SetWeight(GroupId group, double weight) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group);
  if (it != groups_.end()) it->second.weight = ClampWeight(weight);
}

void WorkerPool::RemoveGroup(GroupId group) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  if (it->second.tasks.empty()) {
    groups_.erase(it);
    RebaseLocked();
  } else {
    it->second.removed = true;
  }
}

void WorkerPool::RebaseLocked() {
  double base = -1;
  for (const auto& [id, g] : groups_) {
    if (!g.tasks.empty() && (base < 0 || g.pass < base)) base = g.pass;
  }
  // Nothing queued: a group re-enters at min_pass_ at the least.
  if (base < 0) base = min_pass_;
  if (base <= 0) return;
  for (auto& [id, g] : groups_) g.pass = std::max(0.0, g.pass - base);
  min_pass_ = std::max(0.0, min_pass_ - base);
}

void WorkerPool::Submit(GroupId group, Task task) {
  absl::MutexLock lock(&mu_);
  Group& g = groups_.at(group);
  if (g.tasks.empty()) g.pass = std::max(g.pass, min_pass_);
  g.tasks.push_back(std::move(task));
  ++queued_;
  work_cv_.Signal();
}

void WorkerPool::SetActiveThreads(int n) {
  absl::MutexLock lock(&mu_);
  n = std::clamp(n, 1, num_threads_);
  if (n == active_) return;
  active_ = n;
  // Every thread re-checks which side of the line it is on.
  work_cv_.SignalAll();
  parked_cv_.SignalAll();
}

int WorkerPool::active_threads() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

bool WorkerPool::NextTask(int index, Task* task) {
  absl::MutexLock lock(&mu_);
  // A parked thread (index >= active_) takes tasks only to drain at Stop().
  while (queued_ == 0 || (index >= active_ && !stopping_)) {
    if (stopping_ && queued_ == 0) return false;
    // Submit wakes one active thread; parked threads wait apart so that its
    // signal never lands on a thread that may not take the task.
    (index >= active_ ? parked_cv_ : work_cv_).Wait(&mu_);
  }
  auto best = groups_.end();
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    if (it->second.tasks.empty()) continue;
    if (best == groups_.end() || it->second.pass < best->second.pass) best = it;
  }
  Group& g = best->second;
  *task = std::move(g.tasks.front());
  g.tasks.pop_front();
  --queued_;
  min_pass_ = g.pass;
  g.pass += 1.0 / g.weight;
  if (g.removed && g.tasks.empty()) {
    groups_.erase(best);
    RebaseLocked();
  } else if (min_pass_ > kRebaseAt) {
    RebaseLocked();
  }
  return true;
}

void WorkerPool::WorkerLoop(int index) {
  Task task;
  while (NextTask(index, &task)) {
    const int64_t start = NowNs();
    task();
    task = nullptr;
    const int64_t spent = NowNs() - start;
    absl::MutexLock lock(&mu_);
    busy_ns_ += spent;
    ++tasks_run_;
  }
}

WorkerPool::Stats WorkerPool::GetStats() const {
  absl::MutexLock lock(&mu_);
  return Stats{num_threads_, busy_ns_, tasks_run_, queued_, active_};
}

}  // namespace stoker::pipeline
