// MetricsExposer: the HTTP endpoint that serves /metrics, prometheus-cpp's
// Exposer (civetweb) with one StatsCollectable registered. The collectable
// builds every family at scrape time from the snapshot its source returns.
//
// Owns civetweb's threads: they start in Start() and stop in Stop(), which is
// idempotent and waits for a scrape in progress; the destructor calls it.
// After Stop() returns the source is never called again.
//
// Thread-safe.
#ifndef STOKER_SERVER_METRICS_METRICS_EXPOSER_H_
#define STOKER_SERVER_METRICS_METRICS_EXPOSER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/prometheus_collector.h"

namespace prometheus {
class Exposer;
}

namespace stoker::metrics {

class MetricsExposer {
 public:
  // Listens on `listen` ("127.0.0.1:9464", "[::1]:9464"; port 0 picks a free
  // port). Unavailable, naming the address, if it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& listen, StatsCollectable::Source source);
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  void Stop();
  // The bound port (the real one when `listen` asked for port 0).
  int port() const { return port_; }

 private:
  MetricsExposer() = default;

  int port_ = 0;
  std::string host_;  // As configured; a wildcard is reached on loopback.
  // Shared: the exposer holds it by weak_ptr, as prometheus-cpp requires.
  std::shared_ptr<StatsCollectable> collectable_;
  absl::Mutex mu_;
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::metrics

#endif  // STOKER_SERVER_METRICS_METRICS_EXPOSER_H_
