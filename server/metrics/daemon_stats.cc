#include "server/metrics/daemon_stats.h"

namespace stoker::metrics {

std::vector<LabelStats> ReadLabelStats(const service::StreamService& service) {
  std::vector<LabelStats> out;
  for (const auto& [key, c] : service.Counters()) {
    LabelStats s;
    s.key = key;
    s.counts = c->Read();
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
