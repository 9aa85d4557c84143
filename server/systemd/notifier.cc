#include "server/systemd/notifier.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/metrics/log.h"

namespace stoker::systemd {
namespace {

using metrics::Log;
using metrics::LogLevel;

std::chrono::microseconds WatchdogTimeout() {
  uint64_t usec = 0;
  // Reads WATCHDOG_USEC (and WATCHDOG_PID, which must be ours if set).
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) <= 0) {
    return std::chrono::microseconds(0);
  }
  return std::chrono::microseconds(usec);
}

// CLOCK_MONOTONIC in microseconds, which RELOADING=1 carries for systemd
// versions that want it (253+, Type=notify-reload); older ones ignore it.
uint64_t MonotonicMicros() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

// A STATUS= value is one line.
std::string OneLine(std::string_view text) {
  std::string out(text);
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

}  // namespace

Notifier::Notifier(Options options)
    : options_(options),
      enabled_(std::getenv("NOTIFY_SOCKET") != nullptr),
      watchdog_timeout_(enabled_ ? WatchdogTimeout()
                                 : std::chrono::microseconds(0)) {}

Notifier::~Notifier() { Stop(); }

void Notifier::Start() {
  if (!enabled_ || thread_.joinable()) return;
  if (watchdog_timeout_.count() > 0) {
    Log(LogLevel::kInfo, "systemd_watchdog",
        {{"timeout_ms", absl::StrCat(watchdog_timeout_.count() / 1000)},
         {"ping_ms", absl::StrCat(watchdog_timeout_.count() / 2000)}});
  }
  thread_ = std::thread([this] { Run(); });
}

void Notifier::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Notifier::SetStatusSource(std::function<std::string()> source) {
  absl::MutexLock lock(&mu_);
  status_source_ = std::move(source);
}

void Notifier::Ready(std::string_view status) {
  Send(absl::StrCat("READY=1\nSTATUS=", OneLine(status)));
}

void Notifier::Reloading() {
  Send(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", MonotonicMicros(),
                    "\nSTATUS=reloading the config"));
}

void Notifier::Stopping(std::string_view status) {
  Send(absl::StrCat("STOPPING=1\nSTATUS=", OneLine(status)));
}

void Notifier::Status(std::string_view status) {
  Send(absl::StrCat("STATUS=", OneLine(status)));
}

void Notifier::Send(const std::string& message) {
  if (!enabled_) return;
  const int rc = sd_notify(/*unset_environment=*/0, message.c_str());
  if (rc < 0) {
    // Rare (the manager went away); the daemon serves on regardless.
    Log(LogLevel::kWarning, "sd_notify_failed",
        {{"message", message.substr(0, message.find('\n'))},
         {"errno", absl::StrCat(-rc)}});
  }
}

void Notifier::Run() {
  // Ping at half the timeout, as sd_watchdog_enabled(3) recommends, so a
  // late wake-up never costs a restart.
  absl::Duration period = absl::FromChrono(options_.status_interval);
  if (watchdog_timeout_.count() > 0) {
    period = std::min(period, absl::FromChrono(watchdog_timeout_) / 2);
  }
  absl::Time next_status = absl::Now();
  for (;;) {
    std::function<std::string()> source;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      source = status_source_;
    }
    std::string message;
    if (watchdog_timeout_.count() > 0) message = "WATCHDOG=1";
    const absl::Time now = absl::Now();
    if (source && now >= next_status) {
      // The source reads the daemon's counters under its locks: a daemon
      // that deadlocked stops pinging here, and systemd restarts it.
      absl::StrAppend(&message, message.empty() ? "" : "\n",
                      "STATUS=", OneLine(source()));
      next_status = now + absl::FromChrono(options_.status_interval);
    }
    if (!message.empty()) Send(message);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stop_), period);
    if (stop_) return;
  }
}

}  // namespace stoker::systemd
