// ShmRing: a stream's ring of batch slots in an anonymous shared memory file
// (memfd). Workers assemble batches straight into a slot; the client maps
// the same memory read-only and reads them in place.
//
// A memfd has no name: nothing appears in /dev/shm, and the memory is freed
// when the daemon and every client that mapped it have let go, even after
// kill -9 on either side. A client obtains the descriptor only through the
// FdServer, which checks its credentials.
//
// A shared run builds its batches in a ring of its own (as a BufferSource),
// which each shm stream attached to it offers its client as a second ring.
//
// Thread-safe. The ring is shared (shared_ptr) by the stream's reactor and
// its slot buffers, so the mapping outlives any batch still being built.
#ifndef STOKER_SERVER_TRANSPORT_SHM_SHM_RING_H_
#define STOKER_SERVER_TRANSPORT_SHM_SHM_RING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/service/batch.h"
#include "server/transport/shared_descriptor.h"

namespace stoker::transport {

class ShmRing : public service::BufferSource,
                public SharedDescriptor,
                public std::enable_shared_from_this<ShmRing> {
 public:
  // Creates a ring of `slots` slots of at least `batch_bytes` each (rounded
  // up to whole pages). `hold` (the memory reservation) is kept as long as
  // the ring lives. `name` shows in /proc/PID/maps as /memfd:NAME.
  static absl::StatusOr<std::shared_ptr<ShmRing>> Create(
      const char* name, uint32_t slots, size_t batch_bytes,
      std::shared_ptr<void> hold);
  ~ShmRing() override;

  int fd() const override { return fd_; }
  uint32_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // A free slot as a batch buffer, or null if every slot is in use. The
  // buffer's slot stays in use after the buffer is dropped, until Release.
  // Slots are reused most recently released first, so a stream whose
  // batches are taken as soon as they are built keeps to a few of them.
  std::unique_ptr<service::BatchBuffer> Take() override;
  // Before the first batch is written into `slot` (BeforeWrite), maps all
  // its pages in one call (MADV_POPULATE_WRITE): writing a batch into
  // unmapped pages took one page fault per 4 KiB, which cost twice as long
  // (docs/performance.md). A slot never written costs no memory.
  void Populate(uint32_t slot);
  // The client is done with `slot`: it may be filled again. Releasing a
  // slot that is not in use does nothing.
  void Release(uint32_t slot);
  uint32_t free_slots() const;

  // The client has received the ring's descriptor (FdServer). Runs the
  // hand-over hook, once.
  void MarkHandedOver() override;
  bool handed_over() const;
  // `hook` runs on MarkHandedOver; ClearHandOverHook() waits for a running
  // hook and makes sure it never runs again.
  void SetHandOverHook(std::function<void()> hook);
  void ClearHandOverHook();

 private:
  ShmRing(int fd, uint8_t* base, uint32_t slots, size_t slot_bytes,
          std::shared_ptr<void> hold);

  const int fd_;
  uint8_t* const base_;
  const uint32_t slots_;
  const size_t slot_bytes_;
  const std::shared_ptr<void> hold_;

  mutable absl::Mutex mu_;
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> in_use_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> populated_ ABSL_GUARDED_BY(mu_);
  bool handed_over_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex hook_mu_;  // Held while the hook runs.
  std::function<void()> hook_ ABSL_GUARDED_BY(hook_mu_);
};

// A batch buffer that is one slot of a ring.
class ShmSlotBuffer : public service::BatchBuffer {
 public:
  ShmSlotBuffer(std::shared_ptr<ShmRing> ring, uint32_t slot, uint8_t* data)
      : ring_(std::move(ring)), slot_(slot), data_(data) {}
  uint8_t* data() override { return data_; }
  size_t capacity() const override { return ring_->slot_bytes(); }
  void BeforeWrite() override { ring_->Populate(slot_); }
  uint32_t slot() const { return slot_; }
  Home home() const override { return {ring_.get(), slot_}; }

 private:
  const std::shared_ptr<ShmRing> ring_;  // Keeps the mapping alive.
  const uint32_t slot_;
  uint8_t* const data_;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHM_SHM_RING_H_
