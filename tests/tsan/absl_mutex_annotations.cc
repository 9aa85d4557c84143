// Makes Abseil's Mutex, CondVar and Notification visible to ThreadSanitizer
// in the
// STOKER_TSAN build (CMakeLists.txt links this into every executable).
//
// Debian's Abseil is a shared library built without -fsanitize=thread, so
// TSan sees none of the synchronization inside absl::Mutex: it reported
// every member guarded by one as a data race (WorkerPool::NextTask against
// Submit, both under mu_). These definitions interpose the library's (an
// executable's symbol wins over a shared library's), call the library's own
// function, and tell TSan what it did: a lock acquires the mutex's address,
// an unlock releases it, and a wait releases it and acquires it again; a
// Notify releases the notification, and a wait that sees it notified
// acquires it (HasBeenNotified is inline in the header: not annotated).
// The synchronization itself is the library's, unchanged.
//
// Thread-safe: each function is as thread-safe as the one it wraps.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

#define STOKER_TSAN_STR2(x) #x
#define STOKER_TSAN_STR(x) STOKER_TSAN_STR2(x)

// The mangled name of absl::`rest`, e.g. "5Mutex4LockEv"; a const member
// function's name starts with "K".
std::string Mangled(const char* rest) {
  std::string prefix = "_ZN";
  if (rest[0] == 'K') {
    prefix += 'K';
    ++rest;
  }
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const std::string ns = STOKER_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return prefix + "4absl" + std::to_string(ns.size()) + ns + rest;
#else
  return prefix + "4absl" + rest;
#endif
}

// The library's own definition of `rest`: looked up in the shared object
// that defines SetMutexDeadlockDetectionMode, which this file does not
// replace.
template <typename F>
F Real(const char* rest) {
  static void* const library = [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&absl::SetMutexDeadlockDetectionMode),
               &info) == 0) {
      std::fprintf(stderr, "tsan annotations: Abseil's library not found\n");
      std::abort();
    }
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }();
  void* f = library == nullptr ? nullptr
                               : dlsym(library, Mangled(rest).c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan annotations: no %s in Abseil\n",
                 Mangled(rest).c_str());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::Await(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Real<bool (*)(Mutex*, const Condition&, Duration)>(
          "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  static const auto real =
      Real<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(&notified_yet_);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real = Real<void (*)(const Notification*)>(
      "K12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, Duration)>(
      "K12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, Time)>(
      "K12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
