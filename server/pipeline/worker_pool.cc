#include "server/pipeline/worker_pool.h"

#include <algorithm>
#include <chrono>

namespace stoker::pipeline {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
  g.weight = weight > 0 ? weight : 1.0;
  g.pass = min_pass_;
  return id;
}

void WorkerPool::SetWeight(GroupId group, double weight) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group);
  if (it != groups_.end()) it->second.weight = weight > 0 ? weight : 1.0;
}

void WorkerPool::RemoveGroup(GroupId group) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  if (it->second.tasks.empty()) {
    groups_.erase(it);
  } else {
    it->second.removed = true;
  }
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
  if (g.removed && g.tasks.empty()) groups_.erase(best);
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
