#include "server/transport/shm/shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker::transport {

absl::StatusOr<std::shared_ptr<ShmRing>> ShmRing::Create(
    const char* name, uint32_t slots, size_t batch_bytes,
    std::shared_ptr<void> hold) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t slot_bytes =
      (std::max<size_t>(batch_bytes, 1) + page - 1) / page * page;
  const size_t total = slot_bytes * slots;
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot size a shared-memory ring of ", total, " bytes: ",
        std::strerror(err)));
  }
  // The size is final: a client can rely on its mapping staying valid.
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  void* base =
      mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of the ring: ", std::strerror(err)));
  }
  return std::shared_ptr<ShmRing>(new ShmRing(
      fd, static_cast<uint8_t*>(base), slots, slot_bytes, std::move(hold)));
}

ShmRing::ShmRing(int fd, uint8_t* base, uint32_t slots, size_t slot_bytes,
                 std::shared_ptr<void> hold)
    : fd_(fd),
      base_(base),
      slots_(slots),
      slot_bytes_(slot_bytes),
      hold_(std::move(hold)) {
  for (uint32_t i = slots; i > 0; --i) free_.push_back(i - 1);
  in_use_.assign(slots, false);
  populated_.assign(slots, false);
}

ShmRing::~ShmRing() {
  munmap(base_, slot_bytes_ * slots_);
  close(fd_);
}

std::unique_ptr<service::BatchBuffer> ShmRing::Take() {
  uint32_t slot = 0;
  {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return nullptr;
    slot = free_.back();
    free_.pop_back();
    in_use_[slot] = true;
  }
  return std::make_unique<ShmSlotBuffer>(shared_from_this(), slot,
                                         base_ + slot * slot_bytes_);
}

void ShmRing::Populate(uint32_t slot) {
  {
    absl::MutexLock lock(&mu_);
    if (slot >= slots_ || populated_[slot]) return;
    populated_[slot] = true;
  }
#ifdef MADV_POPULATE_WRITE
  // Best effort: a kernel before 5.14 refuses it, and the pages then fault
  // in one by one as before.
  madvise(base_ + slot * slot_bytes_, slot_bytes_, MADV_POPULATE_WRITE);
#endif
}

void ShmRing::Release(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (slot >= slots_ || !in_use_[slot]) return;
  in_use_[slot] = false;
  free_.push_back(slot);
}

void ShmRing::MarkHandedOver() {
  {
    absl::MutexLock lock(&mu_);
    if (handed_over_) return;
    handed_over_ = true;
  }
  absl::MutexLock lock(&hook_mu_);
  if (hook_) hook_();
}

bool ShmRing::handed_over() const {
  absl::MutexLock lock(&mu_);
  return handed_over_;
}

void ShmRing::SetHandOverHook(std::function<void()> hook) {
  absl::MutexLock lock(&hook_mu_);
  hook_ = std::move(hook);
}

void ShmRing::ClearHandOverHook() {
  absl::MutexLock lock(&hook_mu_);
  hook_ = nullptr;
}

uint32_t ShmRing::free_slots() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(free_.size());
}

}  // namespace stoker::transport
