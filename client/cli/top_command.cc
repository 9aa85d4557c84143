#include "client/cli/top_command.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/connect_flags.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::cli {
namespace {

struct TopFlags {
  ConnectFlags connect;
  double interval = 1.0;
  bool once = false;
  bool json = false;
  int count = 0;  // Refreshes before exiting; 0: until interrupted.
};

std::string Cut(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 1) + "~";
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) {
    return absl::StrFormat("%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
  }
  return absl::StrFormat("%dm%02ds", s / 60, s % 60);
}

std::string Bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) {
    return absl::StrFormat("%.1f GiB", bytes / 1073741824.0);
  }
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

std::string Share(double share) {
  return share < 0 ? std::string("-") : absl::StrFormat("%.0f%%", share * 100);
}

std::string Stage(double seconds, double total) {
  return absl::StrFormat("%6.2f %3.0f%%", seconds * 1e3,
                         total > 0 ? seconds / total * 100 : 0.0);
}

int RunTop(const TopFlags& flags) {
  const std::string& address = flags.connect.address;
  absl::StatusOr<std::unique_ptr<Client>> connected =
      ConnectFromFlags(flags.connect);
  if (!connected.ok()) {
    std::fprintf(stderr, "stoker top: cannot read stats from %s: %s\n",
                 address.c_str(), connected.status().ToString().c_str());
    return 1;
  }
  Client* const client = connected->get();
  v1::DaemonStats before;
  if (absl::Status s = client->GetStats(&before); !s.ok()) {
    std::fprintf(stderr, "stoker top: cannot read stats from %s: %s\n",
                 address.c_str(), s.ToString().c_str());
    return 1;
  }
  const auto interval = std::chrono::duration<double>(flags.interval);
  for (int n = 1;; ++n) {
    std::this_thread::sleep_for(interval);
    v1::DaemonStats after;
    if (absl::Status s = client->GetStats(&after); !s.ok()) {
      std::fprintf(stderr, "stoker top: cannot read stats from %s: %s\n",
                   address.c_str(), s.ToString().c_str());
      return 1;
    }
    const TopView view = BuildView(before, after);
    if (flags.json) {
      std::printf("%s\n", ToJson(view).dump().c_str());
    } else {
      // Home and clear, then the screen: a refresh without scrolling.
      if (!flags.once) std::fputs("\033[H\033[2J", stdout);
      std::fputs(Render(view, address).c_str(), stdout);
    }
    std::fflush(stdout);
    if (flags.once || (flags.count > 0 && n >= flags.count)) return 0;
    before = std::move(after);
  }
}

}  // namespace

std::string Render(const TopView& v, const std::string& address) {
  std::string out =
      absl::StrFormat("stoker top  %s  up %s  interval %.1f s\n", address,
                      Duration(v.uptime_seconds), v.interval_seconds);
  absl::StrAppendFormat(
      &out,
      "workers %d, %.0f%% busy, %d tasks queued   memory %s of %s (%.0f%%)"
      "   streams %d, jobs %d\n\n",
      v.worker_threads, v.worker_busy_ratio * 100, v.queued_tasks,
      Bytes(v.memory_reserved), Bytes(v.memory_budget),
      v.memory_budget > 0 ? 100.0 * v.memory_reserved / v.memory_budget : 0.0,
      v.open_streams, v.open_jobs);

  absl::StrAppendFormat(
      &out, "%6s  %-12s %7s  %-12s %-12s %-9s %10s %9s %7s %9s %6s\n", "STREAM",
      "JOB", "RANK", "DATASET", "PIPELINE", "TRANSPORT", "SAMPLES/S", "MB/S",
      "QUEUED", "BUILDING", "STALL");
  for (const StreamRow& s : v.streams) {
    absl::StrAppendFormat(
        &out,
        "%6d  %-12s %7s  %-12s %-12s %-9s %10.1f %9.1f %4d/%-2d %9d %6s\n",
        s.id, Cut(s.job_id.empty() ? "-" : s.job_id, 12),
        absl::StrCat(s.rank, "/", s.world_size), Cut(s.dataset, 12),
        Cut(s.pipeline, 12), Cut(s.transport, 9), s.samples_per_second,
        s.bytes_per_second / 1e6, s.queued, s.prefetch, s.building,
        Share(s.stall_share));
  }
  if (v.streams.empty()) out += "  (no stream open)\n";

  absl::StrAppendFormat(
      &out,
      "\n%-12s %-12s %-12s %-9s %10s %6s  %-11s %-11s %-11s %-11s %-11s  %s\n",
      "JOB", "DATASET", "PIPELINE", "TRANSPORT", "SAMPLES/S", "STALL",
      "READ ms", "DECODE ms", "AUGMENT ms", "COLLATE ms", "TRANSFER ms",
      "VERDICT");
  for (const JobRow& j : v.jobs) {
    const double total = j.per_sample.Total();
    absl::StrAppendFormat(
        &out,
        "%-12s %-12s %-12s %-9s %10.1f %6s  %-11s %-11s %-11s %-11s %-11s  "
        "%s\n",
        Cut(j.job_id.empty() ? "-" : j.job_id, 12), Cut(j.dataset, 12),
        Cut(j.pipeline, 12), Cut(j.transport, 9), j.samples_per_second,
        Share(j.stall_share), Stage(j.per_sample.read, total),
        Stage(j.per_sample.decode, total), Stage(j.per_sample.augment, total),
        Stage(j.per_sample.collate, total), Stage(j.per_sample.transfer, total),
        BottleneckName(j.verdict.bottleneck));
  }
  if (v.jobs.empty()) out += "  (no job active)\n";

  if (!v.staging.empty()) {
    absl::StrAppendFormat(&out, "\nSTAGING\n  %-16s %-9s %7s %10s %8s %9s  %s\n",
                          "DATASET", "STATE", "DONE", "MiB/S", "ETA",
                          "REMOTE RD", "SERVING");
    for (const StagingRow& s : v.staging) {
      const int64_t eta = static_cast<int64_t>(s.eta_seconds + 0.5);
      absl::StrAppendFormat(
          &out, "  %-16s %-9s %6.1f%% %10.1f %8s %9d  %s\n",
          Cut(s.dataset, 16), s.state, s.percent,
          s.bytes_per_second / 1048576.0,
          s.eta_seconds < 0 ? std::string("--:--")
                            : absl::StrFormat("%d:%02d", eta / 60, eta % 60),
          s.remote_records,
          !s.error.empty() ? Cut(s.error, 70)
          : s.servable     ? std::string("yes")
                           : std::string("waiting for the copy"));
    }
  }

  if (!v.helpers.empty()) {
    absl::StrAppendFormat(
        &out, "\nHELPERS  new chunks go %s\n",
        v.placing_remote ? "to helpers (the workers are saturated)"
                         : "to local workers (they keep up)");
    absl::StrAppendFormat(&out, "  %-22s %-4s %7s %10s %6s %11s %9s %6s  %s\n",
                          "ADDRESS", "UP", "CHUNKS", "SAMPLES/S", "SHARE",
                          "KB/SAMPLE", "COPY ms", "FAILED", "LAST ERROR");
    for (const HelperRow& h : v.helpers) {
      absl::StrAppendFormat(
          &out, "  %-22s %-4s %3d/%-3.0f %10.1f %6s %11s %9s %6d  %s\n",
          Cut(h.address, 22), h.up ? "yes" : "no", h.open_chunks, h.allowance,
          h.samples_per_second, Share(h.share),
          h.wire_bytes_per_sample < 0
              ? std::string("-")
              : absl::StrFormat("%.1f", h.wire_bytes_per_sample / 1024),
          h.copy_seconds_per_sample < 0
              ? std::string("-")
              : absl::StrFormat("%.3f", h.copy_seconds_per_sample * 1e3),
          h.failures, Cut(h.last_error, 60));
    }
  }

  if (!v.gpus.empty()) {
    absl::StrAppendFormat(&out, "\nGPUS (cuda_ipc)\n  %-40s %10s %9s %9s %8s %9s\n",
                          "GPU", "DEVICE MiB", "BATCHES/S", "H2D GB/s",
                          "H2D ms", "KERNEL ms");
    const auto ms = [](double x) {
      return x < 0 ? std::string("-") : absl::StrFormat("%.2f", x);
    };
    for (const GpuRow& g : v.gpus) {
      absl::StrAppendFormat(&out, "  %-40s %10.1f %9.1f %9s %8s %9s\n",
                            g.gpu, g.device_bytes / 1048576.0,
                            g.batches_per_second,
                            g.h2d_gbps < 0 ? std::string("-")
                                           : absl::StrFormat("%.1f", g.h2d_gbps),
                            ms(g.h2d_ms_per_batch), ms(g.kernel_ms_per_batch));
    }
  }

  out += "\nSTORAGE\n";
  for (const StorageRow& s : v.storage) {
    absl::StrAppendFormat(&out, "  %-12s %-12s %-10s %s\n", Cut(s.dataset, 12),
                          Cut(s.fstype, 12), s.kind,
                          s.advice.empty() ? s.path : s.advice);
  }
  for (const DamagedDatasetRow& d : v.damaged) {
    absl::StrAppendFormat(&out,
                          "\nUNHEALTHY dataset '%s': streams reaching these "
                          "shards end with DATA_LOSS; run stoker verify\n",
                          d.dataset);
    for (const std::string& shard : d.shards) {
      absl::StrAppendFormat(&out, "  %s\n", shard);
    }
  }
  if (!v.errors.empty()) {
    out += "\nERRORS since start:";
    for (const auto& [code, n] : v.errors) {
      absl::StrAppendFormat(&out, "  %s %d", code, n);
    }
    out += "\n";
  }
  absl::StrAppendFormat(&out, "\nVERDICT  %s: %s\n",
                        BottleneckName(v.verdict.bottleneck), v.verdict.reason);
  if (!v.verdict.change.empty()) {
    absl::StrAppendFormat(&out, "CHANGE   %s\n", v.verdict.change);
  }
  return out;
}

void AddTopCommand(CLI::App& app) {
  auto flags = std::make_shared<TopFlags>();
  CLI::App* cmd = app.add_subcommand(
      "top",
      "Live view of a running stokerd: streams, jobs, rates, data stall, time "
      "per stage, and the bottleneck with the change to make");
  AddConnectFlags(cmd, &flags->connect);
  cmd->add_option("--interval", flags->interval,
                  "Seconds between samples; rates are over this interval")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_flag("--once", flags->once,
                "Sample twice, one interval apart, print once and exit");
  cmd->add_flag("--json", flags->json,
                "Print JSON documents (one per line) instead of the screen");
  cmd->add_option("--count", flags->count,
                  "Exit after this many refreshes (0: until interrupted)")
      ->capture_default_str();
  cmd->callback([flags] { throw CLI::RuntimeError(RunTop(*flags)); });
}

}  // namespace stoker::cli
