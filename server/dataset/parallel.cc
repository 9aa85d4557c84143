#include "server/dataset/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace stoker::dataset {

int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

void ParallelFor(int threads, uint64_t n,
                 const std::function<void(uint64_t)>& fn) {
  const uint64_t workers = std::min<uint64_t>(std::max(threads, 1), n);
  if (workers <= 1) {
    for (uint64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (uint64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (uint64_t i = next++; i < n; i = next++) fn(i);
    });
  }
  for (std::thread& t : pool) t.join();
}

ProgressCounter::ProgressCounter(
    const std::function<void(const PackProgress&)>& callback,
    std::string_view phase, uint64_t total)
    : callback_(callback) {
  progress_.phase = phase;
  progress_.total = total;
  if (callback_) callback_(progress_);
}

void ProgressCounter::Add(uint64_t items, uint64_t bytes) {
  if (!callback_) return;
  absl::MutexLock lock(&mu_);
  progress_.done += items;
  progress_.bytes += bytes;
  callback_(progress_);
}

}  // namespace stoker::dataset
