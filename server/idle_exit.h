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
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

// Decides when a daemon is idle: no stream has been open for `after`,
// counted from the start, from the moment the last open stream was seen, or
// from a Reset.
class IdleTimer {
 public:
  IdleTimer(absl::Duration after, absl::Time start)
      : after_(after), idle_since_(start) {}

  // Takes the number of streams open at `now` (times never decrease);
  // true once they have been 0 for `after`.
  bool Observe(absl::Time now, size_t open_streams);
  // Counts the delay again from `now`.
  void Reset(absl::Time now) { idle_since_ = now; }

 private:
  const absl::Duration after_;
  absl::Time idle_since_;
};

class IdleExit {
 public:
  // `open_streams` counts the daemon's open streams; `on_idle` is called
  // when IdleTimer says the daemon is idle, and returns true if it stops the
  // daemon (then it is not called again) or false if the daemon is still in
  // use (a client holds its lease): the delay then starts again. Both must
  // stay valid until Stop() returns.
  IdleExit(absl::Duration after, std::function<size_t()> open_streams,
           std::function<bool()> on_idle);
  ~IdleExit() { Stop(); }

  void Start();
  // Idempotent; joins the thread.
  void Stop();

 private:
  void Run();

  const absl::Duration after_;
  const std::function<size_t()> open_streams_;
  const std::function<bool()> on_idle_;
  std::thread thread_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// The lease of --idle-lease: clients that need the daemon hold a shared
// flock(2) on the file `path` (the kernel drops it when they exit, however
// they end). Takes an exclusive lock on it without waiting and returns true
// if no client holds one; the lock is then kept until this process exits,
// so a client that comes meanwhile waits for the exit and starts a new
// daemon instead of attaching to a leaving one. False, holding nothing, if a
// client holds the lease or the file cannot be opened (the daemon stays).
bool TakeIdleLease(const std::string& path);

}  // namespace stoker

#endif  // STOKER_SERVER_IDLE_EXIT_H_
