// What pull and push share: a progress meter.
//
// Thread-safe: Meter's methods may be called from many threads.
#ifndef STOKER_SERVER_STORAGE_TRANSFER_UTIL_H_
#define STOKER_SERVER_STORAGE_TRANSFER_UTIL_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/transfer.h"

namespace stoker::storage {

// Counts bytes and files as they move and reports each change to a
// callback, one call at a time.
class Meter {
 public:
  // `callback` may be empty. REQUIRES: it outlives the meter.
  Meter(const std::function<void(const TransferProgress&)>& callback,
        TransferProgress initial)
      : callback_(callback), progress_(initial) {}

  void Add(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    progress_.bytes_done += bytes;
    moved_ += bytes;
    progress_.bytes_moved = moved_;
    if (callback_) callback_(progress_);
  }

  // Counts bytes that are in place without being moved (already written
  // into a part file by a ranged read).
  void Skip(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    if (bytes == 0) return;
    absl::MutexLock lock(&mu_);
    progress_.bytes_done += bytes;
    if (callback_) callback_(progress_);
  }

  // Takes back bytes counted for a file that is fetched again.
  void Retract(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    progress_.bytes_done -= std::min(bytes, progress_.bytes_done);
  }

  void FileDone() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++progress_.files_done;
    if (callback_) callback_(progress_);
  }

  // Bytes moved since construction, refetches included.
  uint64_t moved() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return moved_;
  }

 private:
  const std::function<void(const TransferProgress&)>& callback_;
  absl::Mutex mu_;
  TransferProgress progress_ ABSL_GUARDED_BY(mu_);
  uint64_t moved_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_TRANSFER_UTIL_H_
