#include "client/cli/top_view.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker::cli {
namespace {

using LabelKey = std::tuple<std::string, std::string, std::string, std::string>;

LabelKey KeyOf(const v1::LabelStats& s) {
  return {s.dataset(), s.pipeline(), s.job_id(), s.transport()};
}

// A count of a stream or label set by its name in GetStats' `counts` map
// (server/service/counters.h, kCounts): "samples", "wait_seconds", ...;
// 0 where the daemon sent none.
template <typename Stats>
double CountOf(const Stats& s, const std::string& name) {
  const auto it = s.counts().find(name);
  return it == s.counts().end() ? 0 : it->second;
}

// How much each count of `after` grew since `before`.
template <typename Stats>
std::map<std::string, double> DeltasOf(const Stats& before,
                                       const Stats& after) {
  std::map<std::string, double> deltas;
  for (const auto& [name, value] : after.counts()) {
    deltas[name] = value - CountOf(before, name);
  }
  return deltas;
}

std::map<std::string, double> PerSecond(std::map<std::string, double> deltas,
                                        double dt) {
  for (auto& [name, value] : deltas) value /= dt;
  return deltas;
}

// counts[name], or 0 where the daemon sent no such count.
double Get(const std::map<std::string, double>& counts, const char* name) {
  const auto it = counts.find(name);
  return it == counts.end() ? 0 : it->second;
}

double Ratio(double part, double whole) {
  return whole > 0 ? part / whole : -1;
}

std::string Ms(double seconds) {
  return absl::StrFormat("%.2f ms", seconds * 1e3);
}

// Mean seconds per observation of `stage` between two snapshots.
double MeanLatency(const v1::LabelStats* before, const v1::LabelStats& after,
                   const std::string& stage) {
  auto find = [&](const v1::LabelStats* s) -> const v1::StageLatency* {
    if (s == nullptr) return nullptr;
    for (const v1::StageLatency& l : s->stages()) {
      if (l.stage() == stage) return &l;
    }
    return nullptr;
  };
  const v1::StageLatency* a = find(before);
  const v1::StageLatency* b = find(&after);
  if (b == nullptr) return 0;
  const double count = b->count() - (a ? a->count() : 0);
  const double sum = b->sum_seconds() - (a ? a->sum_seconds() : 0);
  return count > 0 ? sum / count : 0;
}

// Per-sample stage times; transfer is per batch, spread over its samples.
StageTimes StageTimesOf(const v1::LabelStats* before,
                        const v1::LabelStats& after, double samples_per_batch) {
  StageTimes t;
  t.read = MeanLatency(before, after, "read");
  t.decode = MeanLatency(before, after, "decode");
  t.augment = MeanLatency(before, after, "augment");
  t.collate = MeanLatency(before, after, "collate");
  t.transfer =
      MeanLatency(before, after, "transfer") / std::max(1.0, samples_per_batch);
  return t;
}

VerdictInput InputFor(const JobRow& job, const TopView& view,
                      double acks_per_second) {
  VerdictInput in;
  in.samples_per_second = job.samples_per_second;
  in.acks_per_second = acks_per_second;
  // No ack in the interval: a consumer that holds its batches is the limit;
  // one that received nothing is waiting for data.
  in.stall_share = job.stall_share >= 0         ? job.stall_share
                   : job.samples_per_second > 0 ? 0.0
                                                : 1.0;
  in.per_sample = job.per_sample;
  in.worker_threads = view.worker_threads;
  in.worker_busy_ratio = view.worker_busy_ratio;
  in.transport = job.transport;
  for (const StorageRow& s : view.storage) {
    if (s.dataset == job.dataset) in.storage_kind = s.kind;
  }
  return in;
}

}  // namespace

const char* BottleneckName(Bottleneck b) {
  switch (b) {
    case Bottleneck::kIdle:
      return "idle";
    case Bottleneck::kConsumer:
      return "consumer-bound";
    case Bottleneck::kStorage:
      return "storage-bound";
    case Bottleneck::kCpu:
      return "cpu-bound";
    case Bottleneck::kTransport:
      return "transport-bound";
  }
  return "idle";
}

Verdict Diagnose(const VerdictInput& in) {
  const StageTimes& t = in.per_sample;
  if (in.samples_per_second <= 0 && in.acks_per_second <= 0 && t.Total() <= 0) {
    return {Bottleneck::kIdle, "no batch moved in the interval", ""};
  }
  if (in.stall_share < kStallThreshold) {
    return {Bottleneck::kConsumer,
            absl::StrFormat("the consumer waited for data %.0f%% of its time: "
                            "batches are ready before it asks",
                            in.stall_share * 100),
            "the trainer is the bottleneck while data is ready: look at "
            "logging, checkpoints and metrics work in the training loop"};
  }
  const std::string stall = absl::StrFormat(
      "the consumer waited for data %.0f%% of its time", in.stall_share * 100);
  const int threads = std::max(1, in.worker_threads);
  const double worker = t.Worker();
  // Samples per second each side can sustain.
  const double build_rate = worker > 0 ? threads / worker : 0;
  const double transfer_rate = t.transfer > 0 ? 1 / t.transfer : 0;
  if (t.transfer > 0 && (worker <= 0 || transfer_rate < build_rate)) {
    return {Bottleneck::kTransport,
            absl::StrCat(stall, "; handing batches over (", Ms(t.transfer),
                         " per sample) is slower than ", threads,
                         " workers build them (", Ms(worker), " per sample)"),
            in.transport == "grpc"
                ? "use the shm transport (trainer on this node) or cuda_ipc "
                  "(GPU trainer) instead of grpc"
                : "the consumer drains batches slowly: check copies and "
                  "conversions on its side of the transport"};
  }
  const double cpu = t.decode + t.augment + t.collate;
  const bool slow_storage =
      in.storage_kind == "network" || in.storage_kind == "rotational";
  if (t.read > 0 &&
      (t.read >= cpu || (slow_storage && t.read >= 0.25 * worker))) {
    return {Bottleneck::kStorage,
            absl::StrCat(stall, "; reading takes ", Ms(t.read),
                         " per sample against ", Ms(cpu), " of decoding",
                         slow_storage ? absl::StrCat(", from ", in.storage_kind,
                                                     " storage")
                                      : ""),
            "move the dataset to the node's local SSD (stoker pack into a "
            "local path and point datasets.NAME.path there)"};
  }
  std::string change =
      "more workers (`workers:` in the config, up to the cores you can "
      "spare); keep decode fused with the crop (random_resized_crop or "
      "center_crop right after decode_image decodes only the window); a "
      "smaller output (lower size, uint8 or float16); or helper daemons on "
      "CPU machines (`helpers:` in the config, docs/remote-design.md)";
  if (in.worker_busy_ratio < 0.5) {
    change = absl::StrCat(
        "workers are idle half the time: raise prefetch so more batches "
        "build at once; then ",
        change);
  }
  return {
      Bottleneck::kCpu,
      absl::StrFormat("%s; workers spend %s per sample (decode %s, augment %s, "
                      "collate %s) on %d threads, %.0f%% busy",
                      stall, Ms(worker), Ms(t.decode), Ms(t.augment),
                      Ms(t.collate), threads, in.worker_busy_ratio * 100),
      change};
}

TopView BuildView(const v1::DaemonStats& before, const v1::DaemonStats& after) {
  TopView v;
  v.interval_seconds =
      std::max(1e-3, after.uptime_seconds() - before.uptime_seconds());
  const double dt = v.interval_seconds;
  v.uptime_seconds = after.uptime_seconds();
  v.worker_threads = static_cast<int>(after.pool().threads());
  v.worker_busy_ratio =
      std::clamp((after.pool().busy_ns() - double(before.pool().busy_ns())) *
                     1e-9 / (dt * std::max(1, v.worker_threads)),
                 0.0, 1.0);
  v.queued_tasks = after.pool().queued();
  v.memory_reserved = after.memory().reserved_bytes();
  v.memory_budget = after.memory().budget_bytes();
  v.open_streams = after.open_streams();
  for (const v1::StorageStats& s : after.storage()) {
    v.storage.push_back(
        {s.dataset(), s.path(), s.fstype(), s.kind(), s.advice()});
  }
  for (const v1::DatasetHealth& d : after.datasets()) {
    if (d.healthy()) continue;
    DamagedDatasetRow row{d.dataset(), {}};
    for (const v1::ShardDamage& s : d.damage()) {
      row.shards.push_back(absl::StrCat(s.file(), ": ", s.reason()));
    }
    v.damaged.push_back(std::move(row));
  }
  for (const v1::ErrorCount& e : after.errors()) v.errors[e.code()] = e.count();

  // Streams: deltas against the same id; a new stream starts from zero.
  std::map<uint64_t, const v1::StreamStats*> old_streams;
  for (const v1::StreamStats& s : before.streams()) old_streams[s.id()] = &s;
  std::map<LabelKey, int> open_per_key;
  std::set<std::string> jobs;
  for (const v1::StreamStats& s : after.streams()) {
    const auto it = old_streams.find(s.id());
    const v1::StreamStats empty;
    const v1::StreamStats& a = it == old_streams.end() ? empty : *it->second;
    StreamRow r;
    r.id = s.id();
    r.dataset = s.dataset();
    r.pipeline = s.pipeline();
    r.job_id = s.job_id();
    r.transport = s.transport();
    r.rank = s.rank();
    r.world_size = s.world_size();
    r.prefetch = s.prefetch();
    const std::map<std::string, double> delta = DeltasOf(a, s);
    r.samples_per_second = Get(delta, "samples") / dt;
    r.batches_per_second = Get(delta, "batches") / dt;
    r.bytes_per_second = Get(delta, "bytes") / dt;
    r.queued = s.queued();
    r.building = s.building();
    const double wait = Get(delta, "wait_seconds");
    r.stall_share = Ratio(wait, wait + Get(delta, "busy_seconds"));
    r.per_second = PerSecond(delta, dt);
    v.streams.push_back(std::move(r));
    open_per_key[{s.dataset(), s.pipeline(), s.job_id(), s.transport()}] += 1;
    jobs.insert(s.job_id().empty() ? absl::StrCat("#", s.id()) : s.job_id());
  }
  v.open_jobs = static_cast<int>(jobs.size());

  // Jobs (label sets): deltas of the cumulative counters.
  std::map<LabelKey, const v1::LabelStats*> old_labels;
  for (const v1::LabelStats& s : before.labels()) old_labels[KeyOf(s)] = &s;
  double total_samples = 0, total_batches = 0, total_acks = 0;
  double total_wait = 0, total_busy = 0;
  StageTimes total_time;  // Weighted by samples below.
  for (const v1::LabelStats& s : after.labels()) {
    const auto it = old_labels.find(KeyOf(s));
    const v1::LabelStats* a = it == old_labels.end() ? nullptr : it->second;
    const v1::LabelStats empty;
    const v1::LabelStats& base = a == nullptr ? empty : *a;
    const std::map<std::string, double> delta = DeltasOf(base, s);
    const double samples = Get(delta, "samples");
    const double batches = Get(delta, "batches");
    const double acks = Get(delta, "acks");
    const double wait = Get(delta, "wait_seconds");
    const double busy = Get(delta, "busy_seconds");
    const int open = open_per_key[KeyOf(s)];
    JobRow j;
    j.per_sample = StageTimesOf(a, s, batches > 0 ? samples / batches : 1);
    // A job is live while one of its streams is open. One whose streams
    // all closed is history, whatever it did in the interval: shown as a
    // row it would read as running, and its verdict would be about
    // nothing that runs now.
    if (open == 0) continue;
    j.dataset = s.dataset();
    j.pipeline = s.pipeline();
    j.job_id = s.job_id();
    j.transport = s.transport();
    j.streams = open;
    j.samples_per_second = samples / dt;
    j.bytes_per_second = Get(delta, "bytes") / dt;
    j.stall_share = Ratio(wait, wait + busy);
    j.corrupt = static_cast<uint64_t>(Get(delta, "skipped"));
    j.per_second = PerSecond(delta, dt);
    j.verdict = Diagnose(InputFor(j, v, acks / dt));
    total_samples += samples;
    total_batches += batches;
    total_acks += acks;
    total_wait += wait;
    total_busy += busy;
    const double weight = std::max(samples, 1.0);
    total_time.read += j.per_sample.read * weight;
    total_time.decode += j.per_sample.decode * weight;
    total_time.augment += j.per_sample.augment * weight;
    total_time.collate += j.per_sample.collate * weight;
    total_time.transfer += j.per_sample.transfer * weight;
    v.jobs.push_back(std::move(j));
  }

  // Staging: the rate over the interval, against the same dataset.
  std::map<std::string, const v1::StagingStats*> old_staging;
  for (const v1::StagingStats& st : before.staging()) {
    old_staging[st.dataset()] = &st;
  }
  for (const v1::StagingStats& st : after.staging()) {
    const auto it = old_staging.find(st.dataset());
    StagingRow r;
    r.dataset = st.dataset();
    r.state = st.state();
    r.servable = st.servable();
    r.percent = st.bytes_total() == 0
                    ? 0
                    : 100.0 * double(st.bytes_done()) / double(st.bytes_total());
    if (it != old_staging.end()) {
      r.bytes_per_second =
          (double(st.bytes_fetched()) - double(it->second->bytes_fetched())) /
          dt;
    }
    const double left = double(st.bytes_total()) - double(st.bytes_done());
    if (left <= 0) {
      r.eta_seconds = 0;
    } else if (r.bytes_per_second > 0) {
      r.eta_seconds = left / r.bytes_per_second;
    }
    r.remote_records = st.remote_records();
    r.error = st.error();
    v.staging.push_back(std::move(r));
  }

  // Helpers: deltas against the same address.
  v.placing_remote = after.placing_remote();
  std::map<std::string, const v1::HelperStats*> old_helpers;
  for (const v1::HelperStats& h : before.helpers()) {
    old_helpers[h.address()] = &h;
  }
  for (const v1::HelperStats& h : after.helpers()) {
    const auto it = old_helpers.find(h.address());
    const v1::HelperStats empty;
    const v1::HelperStats& a = it == old_helpers.end() ? empty : *it->second;
    HelperRow r;
    r.address = h.address();
    r.up = h.up();
    r.open_chunks = h.open_chunks();
    r.allowance = h.allowance();
    const double samples = h.samples() - double(a.samples());
    r.samples_per_second = samples / dt;
    r.share = total_samples > 0 ? samples / total_samples : 0;
    if (samples > 0) {
      r.wire_bytes_per_sample = (h.wire_bytes() - double(a.wire_bytes())) /
                                samples;
      r.copy_seconds_per_sample =
          (h.copy_seconds() - a.copy_seconds()) / samples;
    }
    r.failures = h.failures() - a.failures();
    r.late = h.late() - a.late();
    r.last_error = h.last_error();
    v.helpers.push_back(std::move(r));
  }

  // GPUs: cuda_ipc's values, labelled gpu, against the same GPU before.
  using GpuValues = std::map<std::string, double>;  // By metric.
  const auto gpu_values = [](const v1::DaemonStats& s) {
    std::map<std::string, GpuValues> by_gpu;
    for (const v1::NamedValue& n : s.transport_values()) {
      const auto gpu = n.labels().find("gpu");
      if (gpu == n.labels().end()) continue;
      by_gpu[gpu->second][n.metric()] = n.value();
    }
    return by_gpu;
  };
  std::map<std::string, GpuValues> gpus_before = gpu_values(before);
  for (auto& [gpu, now] : gpu_values(after)) {
    GpuValues& then = gpus_before[gpu];
    const auto delta = [&](const char* metric) {
      return now[metric] - then[metric];
    };
    GpuRow r;
    r.gpu = gpu;
    r.device_bytes = static_cast<uint64_t>(now["stoker_cuda_device_bytes"]);
    const double batches = delta("stoker_cuda_batches_total");
    const double bytes = delta("stoker_cuda_h2d_bytes_total");
    const double h2d = delta("stoker_cuda_h2d_seconds_total");
    r.batches_per_second = batches / dt;
    r.h2d_bytes_per_second = bytes / dt;
    if (h2d > 0) r.h2d_gbps = bytes / h2d / 1e9;
    if (batches > 0) {
      r.h2d_ms_per_batch = h2d / batches * 1e3;
      r.kernel_ms_per_batch =
          delta("stoker_cuda_kernel_seconds_total") / batches * 1e3;
    }
    v.gpus.push_back(std::move(r));
  }

  // The overall verdict: all active jobs as one. The storage and transport
  // of the busiest job stand for the rest.
  JobRow all;
  all.samples_per_second = total_samples / dt;
  all.stall_share = Ratio(total_wait, total_wait + total_busy);
  double weight = 0;
  for (const JobRow& j : v.jobs)
    weight += std::max(j.samples_per_second * dt, 1.0);
  if (weight > 0) {
    all.per_sample.read = total_time.read / weight;
    all.per_sample.decode = total_time.decode / weight;
    all.per_sample.augment = total_time.augment / weight;
    all.per_sample.collate = total_time.collate / weight;
    all.per_sample.transfer = total_time.transfer / weight;
  }
  const JobRow* busiest = nullptr;
  for (const JobRow& j : v.jobs) {
    if (busiest == nullptr ||
        j.samples_per_second > busiest->samples_per_second) {
      busiest = &j;
    }
  }
  if (busiest != nullptr) {
    all.dataset = busiest->dataset;
    all.transport = busiest->transport;
  }
  v.verdict = Diagnose(InputFor(all, v, total_acks / dt));
  return v;
}

}  // namespace stoker::cli
