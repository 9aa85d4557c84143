// ToJson: the view as `stoker top --once --json` prints it.
#include "client/cli/top_view.h"

#include <utility>

namespace stoker::cli {
namespace {

nlohmann::json StagesJson(const StageTimes& t) {
  const double total = t.Total();
  nlohmann::json out = nlohmann::json::object();
  const std::pair<const char*, double> stages[] = {{"read", t.read},
                                                   {"decode", t.decode},
                                                   {"augment", t.augment},
                                                   {"collate", t.collate},
                                                   {"transfer", t.transfer}};
  for (const auto& [name, seconds] : stages) {
    out[name] = {{"seconds_per_sample", seconds},
                 {"share", total > 0 ? seconds / total : 0.0}};
  }
  return out;
}

nlohmann::json VerdictJson(const Verdict& v) {
  return {{"bottleneck", BottleneckName(v.bottleneck)},
          {"reason", v.reason},
          {"change", v.change}};
}

}  // namespace

nlohmann::json ToJson(const TopView& v) {
  nlohmann::json out;
  out["interval_seconds"] = v.interval_seconds;
  out["uptime_seconds"] = v.uptime_seconds;
  out["workers"] = {{"threads", v.worker_threads},
                    {"busy_ratio", v.worker_busy_ratio},
                    {"queued_tasks", v.queued_tasks}};
  out["memory"] = {{"reserved_bytes", v.memory_reserved},
                   {"budget_bytes", v.memory_budget}};
  out["open_streams"] = v.open_streams;
  out["open_jobs"] = v.open_jobs;
  out["streams"] = nlohmann::json::array();
  for (const StreamRow& s : v.streams) {
    out["streams"].push_back(
        {{"id", s.id},
         {"dataset", s.dataset},
         {"pipeline", s.pipeline},
         {"job_id", s.job_id},
         {"transport", s.transport},
         {"rank", s.rank},
         {"world_size", s.world_size},
         {"prefetch", s.prefetch},
         {"samples_per_second", s.samples_per_second},
         {"batches_per_second", s.batches_per_second},
         {"bytes_per_second", s.bytes_per_second},
         {"queued", s.queued},
         {"building", s.building},
         {"stall_share", s.stall_share < 0 ? nlohmann::json(nullptr)
                                           : nlohmann::json(s.stall_share)},
         {"per_second", s.per_second}});
  }
  out["jobs"] = nlohmann::json::array();
  for (const JobRow& j : v.jobs) {
    out["jobs"].push_back(
        {{"dataset", j.dataset},
         {"pipeline", j.pipeline},
         {"job_id", j.job_id},
         {"transport", j.transport},
         {"streams", j.streams},
         {"samples_per_second", j.samples_per_second},
         {"bytes_per_second", j.bytes_per_second},
         {"stall_share", j.stall_share < 0 ? nlohmann::json(nullptr)
                                           : nlohmann::json(j.stall_share)},
         {"corrupt_samples", j.corrupt},
         {"stages", StagesJson(j.per_sample)},
         {"verdict", VerdictJson(j.verdict)},
         {"per_second", j.per_second}});
  }
  out["storage"] = nlohmann::json::array();
  for (const StorageRow& s : v.storage) {
    out["storage"].push_back({{"dataset", s.dataset},
                              {"path", s.path},
                              {"fstype", s.fstype},
                              {"kind", s.kind},
                              {"advice", s.advice}});
  }
  out["damaged_datasets"] = nlohmann::json::array();
  for (const DamagedDatasetRow& d : v.damaged) {
    out["damaged_datasets"].push_back(
        {{"dataset", d.dataset}, {"shards", d.shards}});
  }
  out["placing_remote"] = v.placing_remote;
  out["helpers"] = nlohmann::json::array();
  const auto or_null = [](double x) {
    return x < 0 ? nlohmann::json(nullptr) : nlohmann::json(x);
  };
  for (const HelperRow& h : v.helpers) {
    out["helpers"].push_back(
        {{"address", h.address},
         {"up", h.up},
         {"open_chunks", h.open_chunks},
         {"allowance", h.allowance},
         {"samples_per_second", h.samples_per_second},
         {"share", h.share},
         {"wire_bytes_per_sample", or_null(h.wire_bytes_per_sample)},
         {"copy_seconds_per_sample", or_null(h.copy_seconds_per_sample)},
         {"failures", h.failures},
         {"late_batches", h.late},
         {"last_error", h.last_error}});
  }
  out["staging"] = nlohmann::json::array();
  for (const StagingRow& s : v.staging) {
    out["staging"].push_back({{"dataset", s.dataset},
                              {"state", s.state},
                              {"servable", s.servable},
                              {"percent", s.percent},
                              {"bytes_per_second", s.bytes_per_second},
                              {"eta_seconds", or_null(s.eta_seconds)},
                              {"remote_records", s.remote_records},
                              {"error", s.error}});
  }
  out["gpus"] = nlohmann::json::array();
  for (const GpuRow& g : v.gpus) {
    out["gpus"].push_back(
        {{"gpu", g.gpu},
         {"device_bytes", g.device_bytes},
         {"batches_per_second", g.batches_per_second},
         {"h2d_bytes_per_second", g.h2d_bytes_per_second},
         {"h2d_gbps", or_null(g.h2d_gbps)},
         {"h2d_ms_per_batch", or_null(g.h2d_ms_per_batch)},
         {"kernel_ms_per_batch", or_null(g.kernel_ms_per_batch)}});
  }
  out["errors"] = nlohmann::json::object();
  for (const auto& [code, n] : v.errors) out["errors"][code] = n;
  out["verdict"] = VerdictJson(v.verdict);
  return out;
}

}  // namespace stoker::cli
