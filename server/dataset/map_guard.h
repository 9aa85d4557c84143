// Map guard: lets a read of a memory-mapped shard survive the file changing
// under it. LMDB hands out pointers into its map of the shard file; if the
// file is truncated (or a damaged page sends LMDB past the end of the file),
// touching such a pointer raises SIGBUS, which would kill the daemon with
// every dataset and stream in it.
//
// Two parts work together:
//   - MappedRegion registers one shard's mapping ([base, base + size)).
//   - RunGuarded(fn, arg) arms a per-thread guard, calls fn, and disarms it.
// A process-wide SIGBUS/SIGSEGV handler, installed with the first region,
// recovers a fault only when both hold: the faulting thread is inside
// RunGuarded, and the address lies in a registered region. It then
// siglongjmps back into RunGuarded, which returns the fault. Every other
// fault goes to the action that was installed before (ASan's handler, or the
// default: the process dies as it always did), so real bugs still crash.
//
// What fn may do: read mapped memory, call LMDB's read functions, copy.
// A jump out of fn skips whatever fn was in the middle of, so fn must not
// own C++ objects with destructors, take locks, or allocate in code that a
// fault can interrupt (LMDB's mdb_txn_begin may leak its transaction if the
// meta pages themselves fault; the caller then marks the shard damaged and
// never reads it again, which bounds that to one per reading thread).
//
// Cost: one sigsetjmp without the signal mask (no system call) and two
// thread-local stores per call.
//
// Thread-safe: regions are registered and removed under a lock; the handler
// reads them without one. RunGuarded calls may nest only if the inner call
// is not interrupted (a fault returns to the innermost guard).
#ifndef STOKER_SERVER_DATASET_MAP_GUARD_H_
#define STOKER_SERVER_DATASET_MAP_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace stoker::dataset {

// A registered mapping; unregisters itself when destroyed, which must
// happen before the memory is unmapped.
class MappedRegion {
 public:
  // ResourceExhausted when the fixed table of regions (16384) is full.
  static absl::StatusOr<std::unique_ptr<MappedRegion>> Register(
      const void* base, size_t size);
  ~MappedRegion();

  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  const void* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  MappedRegion(int slot, const void* base, size_t size)
      : slot_(slot), base_(base), size_(size) {}

  // Constant after construction.
  const int slot_;
  const void* const base_;
  const size_t size_;
};

// What interrupted a guarded call.
struct MapFault {
  int signal = 0;              // SIGBUS or SIGSEGV.
  uintptr_t address = 0;       // The faulting address.
  const void* base = nullptr;  // The start of the region it lies in.
};

// Calls fn(arg) with the guard armed on this thread. Returns true when fn
// ran to its end, false (with *fault filled in) when a fault in a registered
// region interrupted it.
bool RunGuarded(void (*fn)(void*), void* arg, MapFault* fault);

// The name of a fault's signal: "SIGBUS" or "SIGSEGV".
const char* FaultSignalName(int signal);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_MAP_GUARD_H_
