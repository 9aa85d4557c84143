// StatusLine: turns successive DaemonStats snapshots into the one line that
// `systemctl status stokerd` shows (sd_notify STATUS=), e.g.
//
//   3 streams open, 1234 samples/s, 41.2 MiB/s, workers 85% busy
//
// Rates are over the time between two calls; the first call has none yet.
//
// Not thread-safe: one owner calls Next().
#ifndef STOKER_SERVER_SYSTEMD_STATUS_LINE_H_
#define STOKER_SERVER_SYSTEMD_STATUS_LINE_H_

#include <cstdint>
#include <string>

#include "server/metrics/daemon_stats.h"

namespace stoker::systemd {

class StatusLine {
 public:
  std::string Next(const metrics::DaemonStats& now);

 private:
  bool has_previous_ = false;
  double uptime_ = 0;
  int64_t samples_ = 0;
  int64_t bytes_ = 0;
  int64_t busy_ns_ = 0;
};

}  // namespace stoker::systemd

#endif  // STOKER_SERVER_SYSTEMD_STATUS_LINE_H_
