#include "server/service/autotune_thread.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace stoker::service {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU seconds every process of the machine has used, from /proc/stat's first
// line (user nice system idle iowait irq softirq steal); -1 when unreadable.
double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  int64_t v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return -1;
  for (int64_t& x : v) {
    if (!(in >> x)) return -1;
  }
  const int64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / sysconf(_SC_CLK_TCK);
}

// This process's CPU seconds (utime + stime), from /proc/self/stat; -1 when
// unreadable.
double SelfCpuSeconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(line.substr(paren + 2));
  std::string skip;
  // Fields 3..13 come before utime (14) and stime (15).
  for (int i = 3; i <= 13; ++i) fields >> skip;
  int64_t utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

int CoresOfMachine() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int CoresWeMayUse() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return CoresOfMachine();
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

AutotuneThread::AutotuneThread(AutotuneLimits limits,
                               pipeline::WorkerPool* pool,
                               const StreamService* service,
                               std::atomic<uint32_t>* prefetch,
                               absl::Duration period)
    : pool_(pool),
      service_(service),
      prefetch_(prefetch),
      period_(period),
      tuner_(limits) {
  const AutotuneDecision& d = tuner_.current();
  state_.workers_auto = limits.tune_workers;
  state_.prefetch_auto = limits.tune_prefetch;
  state_.workers = d.workers;
  state_.prefetch = d.prefetch;
  state_.reason = d.reason;
  if (limits.tune_workers) pool_->SetActiveThreads(d.workers);
  if (limits.tune_prefetch) prefetch_->store(d.prefetch);
}

AutotuneThread::~AutotuneThread() { Stop(); }

void AutotuneThread::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void AutotuneThread::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

AutotuneState AutotuneThread::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

AutotuneThread::Totals AutotuneThread::Read() const {
  Totals t;
  t.wall = NowSeconds();
  t.pool_busy = pool_->GetStats().busy_ns * 1e-9;
  for (const auto& [key, c] : service_->Counters()) {
    const CountValues v = c->Read();
    t.samples += v[Count::kSamples];
    t.wait += v.Exported(Count::kWaitNs);
    t.consumer_busy += v.Exported(Count::kBusyNs);
    t.acks += v[Count::kAcks];
  }
  t.machine_busy = MachineBusySeconds();
  t.self_cpu = SelfCpuSeconds();
  return t;
}

void AutotuneThread::Loop() {
  const int machine_cores = CoresOfMachine();
  const int our_cores = CoresWeMayUse();
  Totals before = Read();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), period_)) return;
    }
    const Totals now = Read();
    AutotuneMeasurement m;
    m.seconds = now.wall - before.wall;
    m.samples = now.samples - before.samples;
    m.pool_busy_seconds = now.pool_busy - before.pool_busy;
    m.wait_seconds = now.wait - before.wait;
    m.consumer_busy_seconds = now.consumer_busy - before.consumer_busy;
    m.acks = now.acks - before.acks;
    if (before.machine_busy >= 0 && now.machine_busy >= 0 &&
        before.self_cpu >= 0 && now.self_cpu >= 0 && m.seconds > 0) {
      const double others = std::max(
          0.0, (now.machine_busy - before.machine_busy) -
                   (now.self_cpu - before.self_cpu));
      m.free_cores = std::min<double>(
          our_cores, machine_cores - others / m.seconds);
    }
    before = now;
    absl::MutexLock lock(&mu_);
    const AutotuneDecision d = tuner_.Observe(m);
    if (d.workers != state_.workers || d.prefetch != state_.prefetch) {
      ++state_.changes;
      state_.reason = d.reason;
    }
    state_.workers = d.workers;
    state_.prefetch = d.prefetch;
    if (state_.workers_auto) pool_->SetActiveThreads(d.workers);
    if (state_.prefetch_auto) prefetch_->store(d.prefetch);
  }
}

}  // namespace stoker::service
