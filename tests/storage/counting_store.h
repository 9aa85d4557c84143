// Test helpers for pulls: the local store of a folder, and a Store that
// counts what is read through it and can cut a file's transfer after some
// bytes, as a connection cut mid-answer (or a pull killed mid-chunk) does.
#ifndef STOKER_TESTS_STORAGE_COUNTING_STORE_H_
#define STOKER_TESTS_STORAGE_COUNTING_STORE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/store.h"

namespace stoker::storage {

inline std::unique_ptr<Store> Local(const std::string& dir) {
  return OpenStore(ParseLocation(dir).value(), {}).value();
}

// A store (the local store of a folder, in these tests) counting the bytes
// and requests read of each file.
class CountingStore : public Store {
 public:
  explicit CountingStore(std::unique_ptr<Store> inner)
      : inner_(std::move(inner)) {}
  std::string Display() const override { return inner_->Display(); }
  absl::StatusOr<uint64_t> Stat(const std::string& name) override {
    return inner_->Stat(name);
  }
  absl::StatusOr<std::vector<ObjectInfo>> List() override {
    return inner_->List();
  }
  absl::Status ReadToFile(const std::string& name, uint64_t offset,
                          uint64_t length, int fd, uint64_t fd_offset,
                          const ByteCounter& counter) override {
    const uint64_t allowed = Count(name, length);
    if (allowed < length) {
      if (allowed > 0) {
        absl::Status s =
            inner_->ReadToFile(name, offset, allowed, fd, fd_offset, counter);
        if (!s.ok()) return s;
      }
      return absl::UnavailableError(
          absl::StrCat(name, ": cut after ", allowed, " bytes"));
    }
    return inner_->ReadToFile(name, offset, length, fd, fd_offset, counter);
  }
  absl::StatusOr<std::string> Read(const std::string& name, uint64_t offset,
                                   uint64_t length) override {
    Count(name, length);
    return inner_->Read(name, offset, length);
  }
  absl::Status Put(const std::string& name, const std::string& bytes) override {
    return inner_->Put(name, bytes);
  }
  absl::Status PutFile(const std::string& name, const std::string& path,
                       const ByteCounter& counter) override {
    return inner_->PutFile(name, path, counter);
  }
  // From now on, a ReadToFile of `name` that would take its bytes read
  // past `bytes` writes only up to there and fails with Unavailable.
  void CutAfter(const std::string& name, uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    cut_name_ = name;
    cut_after_ = bytes;
  }
  uint64_t bytes(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return bytes_[name];
  }
  uint64_t requests(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return requests_[name];
  }

 private:
  // Counts a read of `length` bytes of `name`; returns how many of them
  // it may deliver before it is cut.
  uint64_t Count(const std::string& name, uint64_t length) {
    absl::MutexLock lock(&mu_);
    if (name == cut_name_) {
      const uint64_t done = bytes_[name];
      length = cut_after_ > done ? std::min(length, cut_after_ - done) : 0;
    }
    bytes_[name] += length;
    ++requests_[name];
    return length;
  }
  const std::unique_ptr<Store> inner_;
  absl::Mutex mu_;
  std::map<std::string, uint64_t> bytes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> requests_ ABSL_GUARDED_BY(mu_);
  std::string cut_name_ ABSL_GUARDED_BY(mu_);
  uint64_t cut_after_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker::storage

#endif  // STOKER_TESTS_STORAGE_COUNTING_STORE_H_
