// DaemonStats: one consistent-enough snapshot of everything stokerd counts,
// as plain values. The composition root gathers it from the stream service,
// the worker pool and the storage probe; the Prometheus collector and the
// GetStats RPC both render it, so /metrics and `stoker top` never disagree.
//
// Gathering costs a few mutex acquisitions and copies, at scrape or RPC time;
// nothing is pushed on the hot path (streams only bump their atomic
// counters).
//
// A value type: not synchronized.
#ifndef STOKER_SERVER_METRICS_DAEMON_STATS_H_
#define STOKER_SERVER_METRICS_DAEMON_STATS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "server/metrics/storage_probe.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/autotune_thread.h"
#include "server/service/counters.h"
#include "server/service/remote_source.h"
#include "server/service/stream_service.h"
#include "server/staging/stage_status.h"

namespace stoker::metrics {

// The cumulative counters of one label set, read.
struct LabelStats {
  service::CounterKey key;
  service::CountValues counts;
  std::array<service::LatencyHistogram::Snapshot, service::kNumStages> latency;
};

struct DatasetStorage {
  std::string dataset;
  std::string path;
  StorageDiagnosis diagnosis;
};

struct DaemonStats {
  double uptime_seconds = 0;
  double start_time_seconds = 0;  // Unix time the daemon started.
  service::StreamService::Stats service;
  std::vector<service::StreamSnapshot> streams;  // Open streams.
  std::vector<LabelStats> labels;
  std::array<int64_t, 17> errors{};  // Index: absl::StatusCode.
  pipeline::WorkerPool::Stats pool;
  // What the autotuner chose; all zero and false when it is off.
  service::AutotuneState autotune;
  std::vector<DatasetStorage> storage;
  // The transports' own counters (transport.h: Transport::Counters).
  std::vector<service::NamedCount> transport_counts;
  // The helper daemons (config `helpers`); empty without.
  std::vector<service::HelperStats> helpers;
  bool placing_remote = false;  // New chunks go to helpers now.
  // Each dataset with a `source`: its staging.
  std::vector<staging::StageStatus> staging;
};

// Reads the counters of every label set `service` has seen.
std::vector<LabelStats> ReadLabelStats(const service::StreamService& service);

// The name of a status code as gRPC spells it: 5 -> "NOT_FOUND".
const char* StatusCodeName(int code);

}  // namespace stoker::metrics

#endif  // STOKER_SERVER_METRICS_DAEMON_STATS_H_
