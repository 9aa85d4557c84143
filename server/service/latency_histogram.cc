#include "server/service/latency_histogram.h"

#include <algorithm>

namespace stoker::service {

void LatencyHistogram::Observe(int64_t nanoseconds) {
  const double seconds = nanoseconds * 1e-9;
  const size_t bucket =
      std::lower_bound(kBounds.begin(), kBounds.end(), seconds) -
      kBounds.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(nanoseconds, std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot s;
  for (size_t i = 0; i < counts_.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];
  }
  s.sum_seconds = sum_ns_.load(std::memory_order_relaxed) * 1e-9;
  return s;
}

}  // namespace stoker::service
