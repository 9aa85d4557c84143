#include "server/idle_exit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

namespace stoker {

bool IdleTimer::Observe(absl::Time now, size_t open_streams) {
  if (open_streams > 0) {
    idle_since_ = now;
    return false;
  }
  return now - idle_since_ >= after_;
}

IdleExit::IdleExit(absl::Duration after, std::function<size_t()> open_streams,
                   std::function<bool()> on_idle)
    : after_(after),
      open_streams_(std::move(open_streams)),
      on_idle_(std::move(on_idle)) {}

void IdleExit::Start() { thread_ = std::thread([this] { Run(); }); }

void IdleExit::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void IdleExit::Run() {
  // A tenth of the delay between looks (at most a second): the daemon goes
  // at most 10 % late, and an idle daemon wakes rarely.
  const absl::Duration period =
      std::clamp(after_ / 10, absl::Milliseconds(10), absl::Seconds(1));
  IdleTimer timer(after_, absl::Now());
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), period);
    if (stop_) return;
    // Not under mu_: the count takes the service's locks.
    mu_.Unlock();
    bool stopped = false;
    if (timer.Observe(absl::Now(), open_streams_())) {
      stopped = on_idle_();
      if (!stopped) timer.Reset(absl::Now());
    }
    mu_.Lock();
    if (stopped) return;
  }
}

bool TakeIdleLease(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return false;
  }
  return true;  // The descriptor, and the lock, stay until the exit.
}

}  // namespace stoker
