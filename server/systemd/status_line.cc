#include "server/systemd/status_line.h"

#include "absl/strings/str_format.h"

namespace stoker::systemd {

std::string StatusLine::Next(const metrics::DaemonStats& now) {
  int64_t samples = 0;
  int64_t bytes = 0;
  for (const metrics::LabelStats& label : now.labels) {
    samples += label.counts[service::Count::kSamples];
    bytes += label.counts[service::Count::kBytes];
  }
  const uint32_t open = now.service.open_streams;
  std::string line =
      absl::StrFormat("%u stream%s open", open, open == 1 ? "" : "s");
  const double seconds = now.uptime_seconds - uptime_;
  if (has_previous_ && seconds > 0) {
    const double busy =
        now.pool.threads > 0
            ? (now.pool.busy_ns - busy_ns_) / 1e9 / seconds / now.pool.threads
            : 0.0;
    absl::StrAppendFormat(&line,
                          ", %.0f samples/s, %.1f MiB/s, workers %.0f%% busy",
                          (samples - samples_) / seconds,
                          (bytes - bytes_) / seconds / (1 << 20), busy * 100);
  }
  absl::StrAppendFormat(&line, ", %d samples served since start", samples);
  has_previous_ = true;
  uptime_ = now.uptime_seconds;
  samples_ = samples;
  bytes_ = bytes;
  busy_ns_ = now.pool.busy_ns;
  return line;
}

}  // namespace stoker::systemd
