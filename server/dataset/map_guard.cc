#include "server/dataset/map_guard.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

constexpr int kMaxRegions = 16384;

// One registered mapping. The handler reads these without a lock; a slot
// changes only while its region is being added or removed, when no guarded
// read of it runs.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
};
Slot g_slots[kMaxRegions];
// Slots [0, g_high) may be in use; the handler scans no further.
std::atomic<int> g_high{0};
std::mutex g_mu;
bool g_used[kMaxRegions];  // Guarded by g_mu.

// The actions installed before ours, to which foreign faults go.
struct sigaction g_old_bus;
struct sigaction g_old_segv;

// The guard of the current thread. Trivially constructible, so the handler
// reads it without running any initializer; RunGuarded touches it first.
struct Guard {
  sigjmp_buf jump;
  volatile sig_atomic_t armed;
  MapFault fault;
};
thread_local Guard t_guard __attribute__((tls_model("initial-exec")));

// Hands a fault we do not own to the previous action. For the default
// action (and for "ignore", which for a fault would spin), the default is
// put back and the handler returns: the faulting instruction runs again and
// the kernel ends the process with the signal, core dump and all, exactly as
// without this handler. A signal sent by kill() is raised again instead.
void Chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& old = sig == SIGBUS ? g_old_bus : g_old_segv;
  if ((old.sa_flags & SA_SIGINFO) != 0 && old.sa_sigaction != nullptr) {
    old.sa_sigaction(sig, info, context);
    return;
  }
  if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler != SIG_DFL &&
      old.sa_handler != SIG_IGN) {
    old.sa_handler(sig);
    return;
  }
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (info->si_code <= 0) raise(sig);  // Sent, not a fault: send it again.
}

void OnFault(int sig, siginfo_t* info, void* context) {
  Guard& g = t_guard;
  if (g.armed) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    const int high = g_high.load(std::memory_order_acquire);
    for (int i = 0; i < high; ++i) {
      const uintptr_t begin = g_slots[i].begin.load(std::memory_order_relaxed);
      const uintptr_t end = g_slots[i].end.load(std::memory_order_relaxed);
      if (addr >= begin && addr < end) {
        g.armed = 0;
        g.fault.signal = sig;
        g.fault.address = addr;
        g.fault.base = reinterpret_cast<const void*>(begin);
        siglongjmp(g.jump, 1);
      }
    }
  }
  Chain(sig, info, context);
}

void InstallHandler() {
  struct sigaction sa = {};
  sa.sa_sigaction = OnFault;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER keeps the signal unblocked in the handler, so that after the
  // siglongjmp (which, from sigsetjmp(.., 0), restores no mask) the next
  // fault on this thread is delivered too. SA_ONSTACK uses a thread's
  // alternate stack where it has one (ASan's), so a stack overflow still
  // reaches the chained handler.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigaction(SIGBUS, &sa, &g_old_bus);
  sigaction(SIGSEGV, &sa, &g_old_segv);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedRegion>> MappedRegion::Register(
    const void* base, size_t size) {
  static std::once_flag installed;
  std::call_once(installed, InstallHandler);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kMaxRegions; ++i) {
    if (g_used[i]) continue;
    g_used[i] = true;
    g_slots[i].begin.store(begin, std::memory_order_relaxed);
    g_slots[i].end.store(begin + size, std::memory_order_release);
    if (g_high.load(std::memory_order_relaxed) <= i) {
      g_high.store(i + 1, std::memory_order_release);
    }
    return std::unique_ptr<MappedRegion>(new MappedRegion(i, base, size));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "more than ", kMaxRegions, " shard files are open in this process"));
}

MappedRegion::~MappedRegion() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_slots[slot_].end.store(0, std::memory_order_relaxed);
  g_slots[slot_].begin.store(0, std::memory_order_release);
  g_used[slot_] = false;
}

bool RunGuarded(void (*fn)(void*), void* arg, MapFault* fault) {
  // No local lives across the sigsetjmp: after the jump only the
  // thread-local guard and the unchanged arguments are read.
  if (sigsetjmp(t_guard.jump, 0) != 0) {
    *fault = t_guard.fault;
    return false;
  }
  t_guard.armed = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn(arg);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard.armed = 0;
  return true;
}

const char* FaultSignalName(int signal) {
  return signal == SIGBUS ? "SIGBUS" : "SIGSEGV";
}

}  // namespace stoker::dataset
