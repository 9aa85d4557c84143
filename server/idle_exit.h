// IdleExit: stops a daemon that has had no open stream for a while, so that a
// daemon started for its trainers (the Python Loader's private stokerd) goes
// away shortly after the last of them, however they ended (a kill -9 too:
// its streams end when its connection drops).
//
// IdleTimer is the rule, over plain values; IdleExit is the thread that
// applies it to the running daemon.
//
// Thread-safety: IdleTimer is thread-compatible. IdleExit is thread-safe;
// its callbacks run on its own thread.
#ifndef STOKER_SERVER_IDLE_EXIT_H_
#define STOKER_SERVER_IDLE_EXIT_H_

#include <cstddef>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

// Decides when a daemon is idle: no stream has been open for `after`,
// counted from the start or from the moment the last open stream was seen.
class IdleTimer {
 public:
  IdleTimer(absl::Duration after, absl::Time start)
      : after_(after), idle_since_(start) {}

  // Takes the number of streams open at `now` (times never decrease);
  // true once they have been 0 for `after`.
  bool Observe(absl::Time now, size_t open_streams);

 private:
  const absl::Duration after_;
  absl::Time idle_since_;
};

class IdleExit {
 public:
  // `open_streams` counts the daemon's open streams; `on_idle` is called
  // once, when IdleTimer says the daemon is idle. Both must stay valid
  // until Stop() returns.
  IdleExit(absl::Duration after, std::function<size_t()> open_streams,
           std::function<void()> on_idle);
  ~IdleExit() { Stop(); }

  void Start();
  // Idempotent; joins the thread.
  void Stop();

 private:
  void Run();

  const absl::Duration after_;
  const std::function<size_t()> open_streams_;
  const std::function<void()> on_idle_;
  std::thread thread_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_IDLE_EXIT_H_
