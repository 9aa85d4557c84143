// Cumulative counters of all streams that share the same labels (dataset,
// pipeline, job, transport). Streams add to them as they work; the metrics
// layer reads them. They live in the StreamService and are shared with each
// stream (shared_ptr), so what a stream counted outlives the stream: a
// Prometheus counter never goes backwards when a stream closes.
//
// Thread-safe: every field is atomic.
#ifndef STOKER_SERVER_SERVICE_COUNTERS_H_
#define STOKER_SERVER_SERVICE_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>

#include "server/service/latency_histogram.h"

namespace stoker::service {

// The stages a sample or batch goes through, for latency histograms.
enum class Stage { kRead, kDecode, kAugment, kCollate, kTransfer };
inline constexpr int kNumStages = 5;
const char* StageName(Stage stage);

struct CounterKey {
  std::string dataset;
  std::string pipeline;
  std::string job;  // The job id, or empty.
  std::string transport;
  bool operator<(const CounterKey& o) const {
    return std::tie(dataset, pipeline, job, transport) <
           std::tie(o.dataset, o.pipeline, o.job, o.transport);
  }
};

struct StreamCounters {
  std::atomic<int64_t> samples{0};
  std::atomic<int64_t> batches{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> skipped{0};  // Corrupt samples left out.
  // Batches delivered from a shared run that built them once for several.
  std::atomic<int64_t> shared_batches{0};
  std::atomic<int64_t> acks{0};
  std::atomic<int64_t> wait_ns{0};  // Consumers waited for batches.
  std::atomic<int64_t> busy_ns{0};  // Consumers spent between requests.
  std::array<LatencyHistogram, kNumStages> latency;

  void Observe(Stage stage, int64_t ns) {
    latency[static_cast<int>(stage)].Observe(ns);
  }
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_COUNTERS_H_
