#include "server/rpc/stats_convert.h"

namespace stoker::transport {
namespace {

// The counts map, and the fields older clients read.
template <typename Message>
void SetCounts(const service::CountValues& counts, Message* out) {
  using service::Count;
  for (const service::CountDef& def : service::kCounts) {
    (*out->mutable_counts())[def.name] = counts.Exported(def.count);
  }
  out->set_samples(counts[Count::kSamples]);
  out->set_batches(counts[Count::kBatches]);
  out->set_bytes(counts[Count::kBytes]);
  out->set_skipped(counts[Count::kSkipped]);
  out->set_shared_batches(counts[Count::kSharedBatches]);
  out->set_acks(counts[Count::kAcks]);
  out->set_wait_seconds(counts.Exported(Count::kWaitNs));
  out->set_busy_seconds(counts.Exported(Count::kBusyNs));
}

void ToProto(const service::StreamSnapshot& s, v1::StreamStats* out) {
  out->set_id(s.id);
  out->set_dataset(s.spec.dataset);
  out->set_pipeline(s.spec.pipeline);
  out->set_job_id(s.spec.job_id);
  out->set_transport(s.spec.transport);
  out->set_rank(s.spec.rank);
  out->set_world_size(s.spec.world_size);
  out->set_batch_size(s.spec.batch_size);
  out->set_prefetch(s.spec.prefetch);
  out->set_steps_per_epoch(s.steps_per_epoch);
  SetCounts(s.stats.counts, out);
  out->set_queued(s.stats.queued);
  out->set_building(s.stats.building);
  out->set_sharing(s.stats.sharing);
}

void ToProto(const metrics::LabelStats& s, v1::LabelStats* out) {
  out->set_dataset(s.key.dataset);
  out->set_pipeline(s.key.pipeline);
  out->set_job_id(s.key.job);
  out->set_transport(s.key.transport);
  SetCounts(s.counts, out);
  for (int i = 0; i < service::kNumStages; ++i) {
    const service::LatencyHistogram::Snapshot& h = s.latency[i];
    v1::StageLatency* stage = out->add_stages();
    stage->set_stage(service::StageName(static_cast<service::Stage>(i)));
    stage->set_count(h.count);
    stage->set_sum_seconds(h.sum_seconds);
    for (uint64_t c : h.counts) stage->add_bucket_counts(c);
  }
}

}  // namespace

void ToProto(const metrics::DaemonStats& stats, v1::DaemonStats* out) {
  out->set_uptime_seconds(stats.uptime_seconds);
  out->set_open_streams(stats.service.open_streams);
  for (const service::StreamSnapshot& s : stats.streams) {
    ToProto(s, out->add_streams());
  }
  for (const metrics::LabelStats& s : stats.labels) {
    ToProto(s, out->add_labels());
  }
  v1::WorkerPoolStats* pool = out->mutable_pool();
  pool->set_threads(stats.pool.threads);
  pool->set_busy_ns(stats.pool.busy_ns);
  pool->set_tasks_run(stats.pool.tasks_run);
  pool->set_queued(stats.pool.queued);
  out->mutable_memory()->set_reserved_bytes(stats.service.bytes_reserved);
  out->mutable_memory()->set_budget_bytes(stats.service.memory_budget);
  out->mutable_memory()->set_high_water_bytes(stats.service.bytes_high_water);
  out->mutable_memory()->set_jobs(stats.service.jobs);
  out->mutable_memory()->set_shared_runs(stats.service.shared_runs);
  for (const metrics::DatasetStorage& d : stats.storage) {
    v1::StorageStats* s = out->add_storage();
    s->set_dataset(d.dataset);
    s->set_path(d.path);
    s->set_fstype(d.diagnosis.fstype);
    s->set_kind(metrics::StorageKindName(d.diagnosis.kind));
    s->set_device(d.diagnosis.device);
    s->set_advice(d.diagnosis.advice);
  }
  for (size_t code = 1; code < stats.errors.size(); ++code) {
    if (stats.errors[code] == 0) continue;
    v1::ErrorCount* e = out->add_errors();
    e->set_code(metrics::StatusCodeName(static_cast<int>(code)));
    e->set_count(stats.errors[code]);
  }
  for (const service::StreamService::DatasetHealth& d :
       stats.service.datasets) {
    v1::DatasetHealth* h = out->add_datasets();
    h->set_dataset(d.dataset);
    h->set_healthy(d.damage.empty());
    for (const dataset::ShardDamage& damage : d.damage) {
      v1::ShardDamage* s = h->add_damage();
      s->set_file(damage.file);
      s->set_reason(damage.reason);
    }
  }
  for (double b : service::LatencyHistogram::kBounds) {
    out->add_latency_bounds_seconds(b);
  }
  for (const service::HelperStats& h : stats.helpers) {
    v1::HelperStats* o = out->add_helpers();
    o->set_address(h.address);
    o->set_up(h.up);
    o->set_open_chunks(h.open_chunks);
    o->set_chunks(h.chunks);
    o->set_batches(h.batches);
    o->set_samples(h.samples);
    o->set_failures(h.failures);
    o->set_rebuilt(h.rebuilt);
    o->set_wire_bytes(h.wire_bytes);
    o->set_payload_bytes(h.payload_bytes);
    o->set_wait_seconds(h.wait_seconds);
    o->set_copy_seconds(h.copy_seconds);
    o->set_last_error(h.last_error);
    o->set_late(h.late);
    o->set_allowance(h.allowance);
  }
  out->set_placing_remote(stats.placing_remote);
  for (const staging::StageStatus& st : stats.staging) {
    v1::StagingStats* o = out->add_staging();
    o->set_dataset(st.dataset);
    o->set_source(st.source);
    o->set_state(staging::StateName(st.state));
    o->set_servable(st.servable);
    o->set_bytes_total(st.bytes_total);
    o->set_bytes_done(st.bytes_done);
    o->set_bytes_fetched(st.bytes_moved);
    o->set_shards_total(static_cast<uint32_t>(st.shards_total));
    o->set_shards_done(static_cast<uint32_t>(st.shards_done));
    o->set_rate(st.rate);
    o->set_eta_seconds(st.eta_seconds());
    o->set_retries(st.retries);
    o->set_remote_records(st.remote_records);
    if (!st.error.ok()) o->set_error(std::string(st.error.message()));
  }
  for (const service::NamedCount& c : stats.transport_counts) {
    v1::NamedValue* o = out->add_transport_values();
    o->set_metric(c.metric);
    for (const auto& [name, value] : c.labels) (*o->mutable_labels())[name] = value;
    o->set_value(c.value);
  }
}

}  // namespace stoker::transport
