#include "server/metrics/daemon_stats.h"

namespace stoker::metrics {

std::vector<LabelStats> ReadLabelStats(const service::StreamService& service) {
  std::vector<LabelStats> out;
  for (const auto& [key, c] : service.Counters()) {
    LabelStats s;
    s.key = key;
    s.samples = c->samples.load(std::memory_order_relaxed);
    s.batches = c->batches.load(std::memory_order_relaxed);
    s.bytes = c->bytes.load(std::memory_order_relaxed);
    s.skipped = c->skipped.load(std::memory_order_relaxed);
    s.shared_batches = c->shared_batches.load(std::memory_order_relaxed);
    s.acks = c->acks.load(std::memory_order_relaxed);
    s.wait_seconds = c->wait_ns.load(std::memory_order_relaxed) * 1e-9;
    s.busy_seconds = c->busy_ns.load(std::memory_order_relaxed) * 1e-9;
    for (int i = 0; i < service::kNumStages; ++i) {
      s.latency[i] = c->latency[i].Read();
    }
    out.push_back(std::move(s));
  }
  return out;
}

const char* StatusCodeName(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (code < 0 || code >= static_cast<int>(std::size(kNames))) {
    return "UNKNOWN";
  }
  return kNames[code];
}

}  // namespace stoker::metrics
