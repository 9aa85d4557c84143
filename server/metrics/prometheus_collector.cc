#include "server/metrics/prometheus_collector.h"

#include <deque>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace stoker::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::vector<ClientMetric::Label> Labels(const service::CounterKey& key) {
  return {{"dataset", key.dataset},
          {"pipeline", key.pipeline},
          {"job_id", key.job},
          {"transport", key.transport}};
}

// Appends families in a fixed order; each Add* returns the new family,
// which stays valid while later ones are added (a deque: no reallocation).
class Families {
 public:
  MetricFamily& Add(std::string name, std::string help, MetricType type) {
    out_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return out_.back();
  }

  void Counter(std::string name, std::string help, double value) {
    Add(std::move(name), std::move(help), MetricType::Counter)
        .metric.push_back(CounterMetric({}, value));
  }
  void Gauge(std::string name, std::string help, double value) {
    Add(std::move(name), std::move(help), MetricType::Gauge)
        .metric.push_back(GaugeMetric({}, value));
  }

  static ClientMetric CounterMetric(std::vector<ClientMetric::Label> labels,
                                    double value) {
    ClientMetric m;
    m.label = std::move(labels);
    m.counter.value = value;
    return m;
  }
  static ClientMetric GaugeMetric(std::vector<ClientMetric::Label> labels,
                                  double value) {
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = value;
    return m;
  }

  std::vector<MetricFamily> Take() {
    return {std::make_move_iterator(out_.begin()),
            std::make_move_iterator(out_.end())};
  }

 private:
  std::deque<MetricFamily> out_;
};

// Present values of the open streams, summed per label set.
struct OpenStreams {
  int streams = 0;
  int queued = 0;
  int building = 0;
};

void AddLabelCounters(const DaemonStats& stats, Families& f) {
  for (const service::CountDef& def : service::kCounts) {
    MetricFamily& family = f.Add(def.metric, def.help, MetricType::Counter);
    for (const LabelStats& s : stats.labels) {
      family.metric.push_back(Families::CounterMetric(
          Labels(s.key), s.counts.Exported(def.count)));
    }
  }

  MetricFamily& latency =
      f.Add("stoker_stage_seconds",
            "Latency of each stage: read, decode, augment and collate per "
            "sample (on the worker pool), transfer per batch (the transport "
            "handing it over).",
            MetricType::Histogram);
  const auto& bounds = service::LatencyHistogram::kBounds;
  for (const LabelStats& s : stats.labels) {
    for (int stage = 0; stage < service::kNumStages; ++stage) {
      const service::LatencyHistogram::Snapshot& h = s.latency[stage];
      ClientMetric m;
      m.label = Labels(s.key);
      m.label.push_back(
          {"stage", service::StageName(static_cast<service::Stage>(stage))});
      uint64_t cumulative = 0;
      for (size_t i = 0; i < bounds.size(); ++i) {
        cumulative += h.counts[i];
        m.histogram.bucket.push_back({cumulative, bounds[i]});
      }
      // The serializer adds le="+Inf" with the sample count.
      m.histogram.sample_count = h.count;
      m.histogram.sample_sum = h.sum_seconds;
      latency.metric.push_back(std::move(m));
    }
  }
}

void AddOpenStreams(const DaemonStats& stats, Families& f) {
  // Every label set ever seen gets a value, 0 once its streams closed, so a
  // series drops to zero rather than going stale.
  std::map<service::CounterKey, OpenStreams> open;
  for (const LabelStats& s : stats.labels) open[s.key];
  std::set<std::string> jobs;
  int anonymous_jobs = 0;
  for (const service::StreamSnapshot& s : stats.streams) {
    const service::CounterKey key{s.spec.dataset, s.spec.pipeline,
                                  s.spec.job_id, s.spec.transport};
    OpenStreams& o = open[key];
    o.streams += 1;
    o.queued += s.stats.queued;
    o.building += s.stats.building;
    if (s.spec.job_id.empty()) {
      ++anonymous_jobs;  // A stream without a job id is a job of its own.
    } else {
      jobs.insert(s.spec.job_id);
    }
  }
  struct Field {
    const char* name;
    const char* help;
    int OpenStreams::*member;
  };
  static constexpr Field kFields[] = {
      {"stoker_streams_open", "Streams open now.", &OpenStreams::streams},
      {"stoker_queued_batches",
       "Finished batches waiting to be handed to the transport (queue depth).",
       &OpenStreams::queued},
      {"stoker_building_batches", "Batches being built on the worker pool.",
       &OpenStreams::building},
  };
  for (const Field& field : kFields) {
    MetricFamily& family = f.Add(field.name, field.help, MetricType::Gauge);
    for (const auto& [key, o] : open) {
      family.metric.push_back(
          Families::GaugeMetric(Labels(key), o.*field.member));
    }
  }
  f.Gauge("stoker_jobs_open",
          "Jobs with at least one open stream (a stream without a job id "
          "counts as a job).",
          static_cast<double>(jobs.size() + anonymous_jobs));
}

// The datasets served while staging: their ranged reads of the source, by
// dataset (docs/storage.md, "Serving while staging").
void AddSourceReads(
    Families& f,
    const std::vector<service::StreamService::DatasetHealth>& datasets) {
  struct Def {
    const char* name;
    const char* help;
    double (*value)(const dataset::RemoteReadStats&);
  };
  static constexpr Def kDefs[] = {
      {"stoker_source_requests_total",
       "Ranged GETs of records sent to the dataset's source while its shards "
       "were not staged (neighbouring records share one).",
       [](const dataset::RemoteReadStats& s) {
         return static_cast<double>(s.requests);
       }},
      {"stoker_source_fetched_bytes_total",
       "Bytes those GETs returned.",
       [](const dataset::RemoteReadStats& s) {
         return static_cast<double>(s.bytes);
       }},
      {"stoker_source_request_seconds_total",
       "Time those GETs took, summed (divide by stoker_source_requests_total "
       "for the mean latency).",
       [](const dataset::RemoteReadStats& s) {
         return static_cast<double>(s.request_ns) * 1e-9;
       }},
      {"stoker_source_refetches_total",
       "Records fetched again because the first copy failed its checksum.",
       [](const dataset::RemoteReadStats& s) {
         return static_cast<double>(s.refetches);
       }},
      {"stoker_source_errors_total",
       "GETs of records that failed, and records that failed their checksum "
       "twice.",
       [](const dataset::RemoteReadStats& s) {
         return static_cast<double>(s.errors);
       }},
  };
  for (const Def& def : kDefs) {
    MetricFamily& family = f.Add(def.name, def.help, MetricType::Counter);
    for (const service::StreamService::DatasetHealth& d : datasets) {
      if (!d.source.has_value()) continue;
      family.metric.push_back(
          Families::CounterMetric({{"dataset", d.dataset}}, def.value(*d.source)));
    }
  }
  MetricFamily& cached = f.Add(
      "stoker_source_cache_bytes",
      "Bytes of records read from the source held in memory (bounded).",
      MetricType::Gauge);
  for (const service::StreamService::DatasetHealth& d : datasets) {
    if (!d.source.has_value()) continue;
    cached.metric.push_back(Families::GaugeMetric(
        {{"dataset", d.dataset}}, static_cast<double>(d.source->cached_bytes)));
  }
}

void AddDaemon(const DaemonStats& stats, Families& f) {
  f.Gauge("stoker_worker_threads", "Threads in the worker pool.",
          stats.pool.threads);
  f.Counter("stoker_worker_busy_seconds_total",
            "Time worker threads spent running tasks, summed over threads. "
            "Busy ratio = rate(this) / stoker_worker_threads.",
            stats.pool.busy_ns * 1e-9);
  f.Gauge("stoker_worker_threads_active",
          "Worker threads that take tasks now; the rest are parked "
          "(workers: auto).",
          stats.pool.active_threads);
  if (stats.autotune.workers_auto) {
    f.Gauge("stoker_autotune_workers",
            "Worker threads the autotuner chose (workers: auto).",
            stats.autotune.workers);
  }
  if (stats.autotune.prefetch_auto) {
    f.Gauge("stoker_autotune_prefetch",
            "Prefetch depth the autotuner grants to new streams that ask "
            "for none (prefetch: auto).",
            stats.autotune.prefetch);
  }
  if (stats.autotune.workers_auto || stats.autotune.prefetch_auto) {
    f.Counter("stoker_autotune_changes_total",
              "Decisions of the autotuner that changed the worker count or "
              "the prefetch depth.",
              static_cast<double>(stats.autotune.changes));
  }
  f.Counter("stoker_worker_tasks_total", "Tasks the worker pool ran.",
            static_cast<double>(stats.pool.tasks_run));
  f.Gauge("stoker_worker_queued_tasks", "Tasks waiting for a worker.",
          static_cast<double>(stats.pool.queued));
  f.Gauge("stoker_streams_waiting_to_open",
          "Opens waiting for memory budget or for a rank's previous stream; "
          "they count against max_streams and max_streams_per_peer.",
          static_cast<double>(stats.service.waiting_opens));
  f.Gauge("stoker_memory_reserved_bytes",
          "Bytes reserved by open streams for batches in flight.",
          static_cast<double>(stats.service.bytes_reserved));
  f.Gauge("stoker_memory_budget_bytes",
          "The memory_budget: most bytes all streams may reserve.",
          static_cast<double>(stats.service.memory_budget));
  f.Gauge("stoker_memory_high_water_bytes",
          "Most bytes reserved at once since start; never above the budget.",
          static_cast<double>(stats.service.bytes_high_water));
  f.Gauge("stoker_shared_runs",
          "Shared preprocessing runs serving streams now.",
          static_cast<double>(stats.service.shared_runs));
  // One family per metric name; its entries differ by label.
  std::map<std::string, MetricFamily*> named;
  for (const service::NamedCount& c : stats.transport_counts) {
    MetricFamily*& family = named[c.metric];
    if (family == nullptr) {
      family = &f.Add(c.metric, c.help,
                      c.gauge ? MetricType::Gauge : MetricType::Counter);
    }
    std::vector<ClientMetric::Label> labels;
    for (const auto& [name, value] : c.labels) labels.push_back({name, value});
    family->metric.push_back(
        c.gauge ? Families::GaugeMetric(std::move(labels), c.value)
                : Families::CounterMetric(std::move(labels), c.value));
  }
  f.Counter("stoker_share_fallbacks_total",
            "Streams that asked to share a run and built their own batches, "
            "since the budget had no room for a new run.",
            static_cast<double>(stats.service.share_fallbacks));

  MetricFamily& errors =
      f.Add("stoker_errors_total",
            "Streams and requests that ended with this status code.",
            MetricType::Counter);
  for (int code = 1; code < static_cast<int>(stats.errors.size()); ++code) {
    errors.metric.push_back(
        Families::CounterMetric({{"code", StatusCodeName(code)}},
                                static_cast<double>(stats.errors[code])));
  }

  MetricFamily& storage =
      f.Add("stoker_dataset_storage_info",
            "Where each dataset lives, checked when it loaded: kind is local, "
            "network or rotational. Anything but local bounds the read rate: "
            "copy the dataset to the node's local SSD.",
            MetricType::Gauge);
  for (const DatasetStorage& d : stats.storage) {
    storage.metric.push_back(
        Families::GaugeMetric({{"dataset", d.dataset},
                               {"fstype", d.diagnosis.fstype},
                               {"kind", StorageKindName(d.diagnosis.kind)}},
                              1));
  }
  MetricFamily& healthy = f.Add(
      "stoker_dataset_healthy",
      "1 while every shard of the dataset reads soundly; 0 once one was "
      "found damaged while serving (the file changed under the daemon, or "
      "its LMDB pages are broken). Streams that reach a damaged shard end "
      "with DATA_LOSS; run `stoker verify` on the dataset and repack it.",
      MetricType::Gauge);
  MetricFamily& damaged = f.Add(
      "stoker_dataset_damaged_shards",
      "Shards of the dataset found damaged while serving.", MetricType::Gauge);
  for (const service::StreamService::DatasetHealth& d :
       stats.service.datasets) {
    healthy.metric.push_back(Families::GaugeMetric({{"dataset", d.dataset}},
                                                   d.damage.empty() ? 1 : 0));
    damaged.metric.push_back(Families::GaugeMetric(
        {{"dataset", d.dataset}}, static_cast<double>(d.damage.size())));
  }
  AddSourceReads(f, stats.service.datasets);
  f.Gauge("stoker_start_time_seconds",
          "Unix time the daemon started, in seconds.",
          stats.start_time_seconds);
}

void AddHelpers(const DaemonStats& stats, Families& f) {
  if (stats.helpers.empty()) return;
  f.Gauge("stoker_helpers_placing",
          "1 while new chunks of batches go to helper daemons: the worker "
          "pool has been saturated (placement local_first), or always "
          "(remote_first).",
          stats.placing_remote ? 1 : 0);
  using H = service::HelperStats;
  struct Field {
    const char* name;
    const char* help;
    MetricType type;
    double (*value)(const H&);
  };
  static constexpr Field kFields[] = {
      {"stoker_helper_up", "1 while the helper answers and is used.",
       MetricType::Gauge, [](const H& h) { return h.up ? 1.0 : 0.0; }},
      {"stoker_helper_open_chunks", "Chunks open on the helper now.",
       MetricType::Gauge, [](const H& h) { return double(h.open_chunks); }},
      {"stoker_helper_chunk_allowance",
       "Chunks the helper may have open now: halved when one of its batches "
       "holds a consumer up, grown while they come in time (local_first).",
       MetricType::Gauge, [](const H& h) { return h.allowance; }},
      {"stoker_helper_late_batches_total",
       "Batches of the helper that held a consumer up: the next batch to "
       "hand over while a later one was already built here.",
       MetricType::Counter, [](const H& h) { return double(h.late); }},
      {"stoker_helper_chunks_total", "Chunks placed on the helper.",
       MetricType::Counter, [](const H& h) { return double(h.chunks); }},
      {"stoker_helper_batches_total",
       "Batches the helper built and this daemon delivered.",
       MetricType::Counter, [](const H& h) { return double(h.batches); }},
      {"stoker_helper_samples_total", "Samples in those batches.",
       MetricType::Counter, [](const H& h) { return double(h.samples); }},
      {"stoker_helper_failures_total",
       "Chunks the helper failed (error, disconnect, stall, a batch not "
       "this daemon's); their batches were built here.",
       MetricType::Counter, [](const H& h) { return double(h.failures); }},
      {"stoker_helper_rebuilt_batches_total",
       "Batches the helper owed when it failed, built here instead.",
       MetricType::Counter, [](const H& h) { return double(h.rebuilt); }},
      {"stoker_helper_wire_bytes_total",
       "Batch bytes received from the helper, as sent (compressed where "
       "they were). Per sample: divide by stoker_helper_samples_total.",
       MetricType::Counter, [](const H& h) { return double(h.wire_bytes); }},
      {"stoker_helper_payload_bytes_total",
       "Batch bytes received from the helper, decoded (uint8 renderings "
       "where the pipeline allows, before normalize).",
       MetricType::Counter,
       [](const H& h) { return double(h.payload_bytes); }},
      {"stoker_helper_wait_seconds_total",
       "Time this daemon's chunk readers waited for the helper's batches.",
       MetricType::Counter, [](const H& h) { return h.wait_seconds; }},
      {"stoker_helper_copy_seconds_total",
       "Time this daemon spent copying the helper's batches into its "
       "buffers, normalizing uint8 renderings on the way.",
       MetricType::Counter, [](const H& h) { return h.copy_seconds; }},
  };
  for (const Field& field : kFields) {
    MetricFamily& family = f.Add(field.name, field.help, field.type);
    for (const H& h : stats.helpers) {
      const double v = field.value(h);
      family.metric.push_back(
          field.type == MetricType::Gauge
              ? Families::GaugeMetric({{"helper", h.address}}, v)
              : Families::CounterMetric({{"helper", h.address}}, v));
    }
  }
}

// Each dataset with a `source` (docs/storage.md, "Staging in the daemon").
void AddStaging(const DaemonStats& stats, Families& f) {
  if (stats.staging.empty()) return;
  using S = staging::StageStatus;
  struct Field {
    const char* name;
    const char* help;
    MetricType type;
    double (*value)(const S&);
  };
  static constexpr Field kFields[] = {
      {"stoker_stage_bytes_total",
       "Bytes fetched from the dataset's source by its staging (refetches "
       "of a bad copy included).",
       MetricType::Counter, [](const S& s) { return double(s.bytes_moved); }},
      {"stoker_stage_remaining_bytes",
       "Bytes of the dataset not yet on local disk.", MetricType::Gauge,
       [](const S& s) { return double(s.bytes_total - s.bytes_done); }},
      {"stoker_stage_size_bytes", "Bytes of the dataset's shards and indexes.",
       MetricType::Gauge, [](const S& s) { return double(s.bytes_total); }},
      {"stoker_stage_shards_staged",
       "Shards of the dataset checked and published on local disk.",
       MetricType::Gauge, [](const S& s) { return double(s.shards_done); }},
      {"stoker_stage_shards", "Shards of the dataset.", MetricType::Gauge,
       [](const S& s) { return double(s.shards_total); }},
      {"stoker_stage_servable",
       "1 once the dataset is in the catalog (streams may open on it).",
       MetricType::Gauge, [](const S& s) { return s.servable ? 1.0 : 0.0; }},
      {"stoker_stage_complete", "1 once the whole copy is published.",
       MetricType::Gauge,
       [](const S& s) { return s.state == S::State::kComplete ? 1.0 : 0.0; }},
      {"stoker_stage_failed", "1 when the staging failed (see the log).",
       MetricType::Gauge,
       [](const S& s) { return s.state == S::State::kFailed ? 1.0 : 0.0; }},
      {"stoker_stage_retries_total",
       "Requests to the source retried (5xx, 408, 429, cut or stalled).",
       MetricType::Counter, [](const S& s) { return double(s.retries); }},
      {"stoker_stage_remote_records_total",
       "Records read by range from the source while the dataset was being "
       "staged.",
       MetricType::Counter,
       [](const S& s) { return double(s.remote_records); }},
  };
  for (const Field& field : kFields) {
    MetricFamily& family = f.Add(field.name, field.help, field.type);
    for (const S& s : stats.staging) {
      const double v = field.value(s);
      family.metric.push_back(
          field.type == MetricType::Gauge
              ? Families::GaugeMetric({{"dataset", s.dataset}}, v)
              : Families::CounterMetric({{"dataset", s.dataset}}, v));
    }
  }
  MetricFamily& errors = f.Add(
      "stoker_stage_errors_total",
      "Failed requests to the source (retried or final) and failed stagings, "
      "by HTTP status, `transport` (refused, cut, stalled) or the error "
      "code (data_loss for a copy that failed its digest).",
      MetricType::Counter);
  for (const S& s : stats.staging) {
    for (const auto& [status, n] : s.errors) {
      errors.metric.push_back(Families::CounterMetric(
          {{"dataset", s.dataset}, {"status", status}}, double(n)));
    }
  }
}

}  // namespace

std::vector<MetricFamily> BuildMetricFamilies(const DaemonStats& stats) {
  Families f;
  AddLabelCounters(stats, f);
  AddOpenStreams(stats, f);
  AddDaemon(stats, f);
  AddHelpers(stats, f);
  AddStaging(stats, f);
  return f.Take();
}

std::string RenderExposition(const DaemonStats& stats) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, BuildMetricFamilies(stats));
  return out.str();
}

std::vector<MetricFamily> StatsCollectable::Collect() const {
  return BuildMetricFamilies(source_());
}

}  // namespace stoker::metrics
