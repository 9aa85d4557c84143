// Notifier: tells the service manager how stokerd is doing, over systemd's
// sd_notify protocol (a datagram to the unix socket named by $NOTIFY_SOCKET):
//
//   Ready("...")   READY=1 once the datasets are loaded and the listeners up,
//   Reloading()    RELOADING=1 while SIGHUP reloads the config, then Ready(),
//   Stopping()     STOPPING=1 when shutdown begins,
//   a thread that sends WATCHDOG=1 at half of $WATCHDOG_USEC (systemd kills
//   and restarts the daemon when pings stop) and STATUS=<line> from the
//   status source every `status_interval`, so `systemctl status` shows what
//   the daemon is doing.
//
// Outside systemd ($NOTIFY_SOCKET unset) every call does nothing, so the
// daemon behaves the same in a terminal, a container or a test.
//
// Thread-safe. Start() starts the thread; Stop() is idempotent and the
// destructor calls it.
#ifndef STOKER_SERVER_SYSTEMD_NOTIFIER_H_
#define STOKER_SERVER_SYSTEMD_NOTIFIER_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker::systemd {

class Notifier {
 public:
  struct Options {
    // How often STATUS= is refreshed (and at least how often the thread
    // wakes); the watchdog may need it to wake more often.
    std::chrono::milliseconds status_interval{2000};
  };

  explicit Notifier(Options options);
  Notifier() : Notifier(Options()) {}
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Whether a service manager listens ($NOTIFY_SOCKET is set).
  bool enabled() const { return enabled_; }
  // The watchdog timeout systemd asked for ($WATCHDOG_USEC, for this
  // process), or zero when the watchdog is off. Pings go at half of it.
  std::chrono::microseconds watchdog_timeout() const {
    return watchdog_timeout_;
  }

  // Starts the ping and status thread, when enabled.
  void Start();
  void Stop();

  // `source` returns the current STATUS= line; called on the notifier's
  // thread, so it must be thread-safe. It replaces any earlier source.
  void SetStatusSource(std::function<std::string()> source);

  void Ready(std::string_view status);
  void Reloading();
  void Stopping(std::string_view status);
  // Sends STATUS=<status> now.
  void Status(std::string_view status);

 private:
  void Send(const std::string& message);
  void Run();

  // Constant after construction.
  const Options options_;
  const bool enabled_;
  const std::chrono::microseconds watchdog_timeout_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::function<std::string()> status_source_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace stoker::systemd

#endif  // STOKER_SERVER_SYSTEMD_NOTIFIER_H_
