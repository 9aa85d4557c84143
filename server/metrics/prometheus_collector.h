// The Prometheus face of stokerd. StatsCollectable builds every metric family
// at scrape time from a DaemonStats snapshot, so serving metrics costs the
// streams nothing: they only bump the atomic counters they keep anyway.
//
// Metrics (labels L = dataset, pipeline, job_id, transport; `job_id` and not
// `job`, which Prometheus reserves for the scrape job):
//
//   stoker_samples_total{L}                  counter  samples delivered
//   stoker_batches_total{L}                  counter  batches delivered
//   stoker_bytes_total{L}                    counter  batch bytes delivered
//   stoker_corrupt_samples_total{L}          counter  corrupt samples skipped
//   stoker_acks_total{L}                     counter  batches acknowledged
//   stoker_consumer_wait_seconds_total{L}    counter  consumers waited (stall)
//   stoker_consumer_busy_seconds_total{L}    counter  consumers worked
//   stoker_stage_seconds{L,stage}            histogram read, decode, augment,
//                                            collate (per sample), transfer
//                                            (per batch)
//   stoker_streams_open{L}                   gauge
//   stoker_queued_batches{L}                 gauge    ready, not yet sent
//   stoker_building_batches{L}               gauge    being built
//   stoker_jobs_open                         gauge
//   stoker_worker_threads                    gauge
//   stoker_worker_busy_seconds_total         counter  (busy ratio = rate /
//                                                     threads)
//   stoker_worker_tasks_total                counter
//   stoker_worker_queued_tasks               gauge
//   stoker_memory_reserved_bytes             gauge    batches in flight
//   stoker_memory_budget_bytes               gauge
//   stoker_errors_total{code}                counter  streams and requests
//                                            that ended with a status code
//   stoker_dataset_storage_info{dataset,fstype,kind}  gauge = 1
//   stoker_dataset_healthy{dataset}          gauge    0 once a shard of it
//                                            was found damaged, else 1
//   stoker_dataset_damaged_shards{dataset}   gauge
//   stoker_start_time_seconds                gauge    unix time
//
// Data stall share of a job = rate(wait) / (rate(wait) + rate(busy)).
// Cardinality is bounded: the service folds job ids past 1024 label sets
// into job_id="_other"; nothing is labelled per stream, batch or sample.
//
// Thread-safe: Collect() may run on several exposer threads at once.
#ifndef STOKER_SERVER_METRICS_PROMETHEUS_COLLECTOR_H_
#define STOKER_SERVER_METRICS_PROMETHEUS_COLLECTOR_H_

#include <functional>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/metrics/daemon_stats.h"

namespace stoker::metrics {

std::vector<prometheus::MetricFamily> BuildMetricFamilies(
    const DaemonStats& stats);

// The text exposition format of `stats`: what /metrics serves.
std::string RenderExposition(const DaemonStats& stats);

class StatsCollectable final : public prometheus::Collectable {
 public:
  using Source = std::function<DaemonStats()>;
  // `source` is called on every scrape, from the exposer's threads.
  explicit StatsCollectable(Source source) : source_(std::move(source)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Source source_;
};

}  // namespace stoker::metrics

#endif  // STOKER_SERVER_METRICS_PROMETHEUS_COLLECTOR_H_
