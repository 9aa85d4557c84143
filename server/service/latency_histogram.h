// LatencyHistogram: a lock-free histogram of durations with fixed,
// Prometheus-friendly bucket bounds, cheap enough to observe once per sample.
// The metrics layer reads Snapshot()s; the service knows nothing of
// Prometheus.
//
// Thread-safe: Observe() from any number of threads; a snapshot taken while
// others observe is consistent per bucket, not across buckets.
#ifndef STOKER_SERVER_SERVICE_LATENCY_HISTOGRAM_H_
#define STOKER_SERVER_SERVICE_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace stoker::service {

class LatencyHistogram {
 public:
  // Upper bounds in seconds: 50 us to 10 s, about three per decade.
  static constexpr std::array<double, 17> kBounds = {
      5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
      5e-2, 0.1,  0.25,   0.5,  1.0,  2.5,    5.0,  10.0};

  struct Snapshot {
    // counts[i] is the number of observations <= kBounds[i] and above the
    // bound before; counts[kBounds.size()] those above the last bound.
    std::array<uint64_t, kBounds.size() + 1> counts{};
    uint64_t count = 0;
    double sum_seconds = 0;
  };

  void Observe(int64_t nanoseconds);
  Snapshot Read() const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<int64_t> sum_ns_{0};
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_LATENCY_HISTOGRAM_H_
