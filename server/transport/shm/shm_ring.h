// ShmRing: a stream's ring of batch slots in an anonymous shared memory file
// (memfd). Workers assemble batches straight into a slot; the client maps
// the same memory read-only and reads them in place.
//
// A memfd has no name: nothing appears in /dev/shm, and the memory is freed
// when the daemon and every client that mapped it have let go, even after
// kill -9 on either side. A client obtains the descriptor only through the
// FdServer, which checks its credentials.
//
// Thread-safe. The ring is shared (shared_ptr) by the stream's reactor and
// its slot buffers, so the mapping outlives any batch still being built.
#ifndef STOKER_SERVER_TRANSPORT_SHM_SHM_RING_H_
#define STOKER_SERVER_TRANSPORT_SHM_SHM_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/service/batch.h"
#include "server/service/stream_service.h"

namespace stoker::transport {

class ShmRing : public std::enable_shared_from_this<ShmRing> {
 public:
  // Creates a ring of `slots` slots of at least `batch_bytes` each (rounded
  // up to whole pages). `ticket` is the stream's memory reservation, kept
  // as long as the ring lives.
  static absl::StatusOr<std::shared_ptr<ShmRing>> Create(
      uint32_t slots, size_t batch_bytes,
      std::shared_ptr<service::StreamTicket> ticket);
  ~ShmRing();

  int fd() const { return fd_; }
  uint32_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // A free slot as a batch buffer, or null if every slot is in use. The
  // buffer's slot stays in use after the buffer is dropped, until Release.
  std::unique_ptr<service::BatchBuffer> Take();
  // The client is done with `slot`: it may be filled again. Releasing a
  // slot that is not in use does nothing.
  void Release(uint32_t slot);
  uint32_t free_slots() const;

  // Called by the FdServer once it has sent the ring's descriptor to the
  // client; runs the hand-over hook. Until then the client can read no
  // slot, so its stream must not end: the ring would leave the FdServer
  // with it, and the client could never map it.
  void MarkHandedOver();
  bool handed_over() const { return handed_over_.load(); }
  // Sets the hook MarkHandedOver runs (on the FdServer's thread), or clears
  // it with nullptr; once cleared it never runs again.
  void SetHandOverHook(std::function<void()> hook);

 private:
  ShmRing(int fd, uint8_t* base, uint32_t slots, size_t slot_bytes,
          std::shared_ptr<service::StreamTicket> ticket);

  const int fd_;
  uint8_t* const base_;
  const uint32_t slots_;
  const size_t slot_bytes_;
  const std::shared_ptr<service::StreamTicket> ticket_;

  mutable absl::Mutex mu_;
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> in_use_ ABSL_GUARDED_BY(mu_);

  std::atomic<bool> handed_over_{false};
  // Held while the hook runs, so clearing it waits for a running one;
  // never taken under mu_.
  absl::Mutex hook_mu_;
  std::function<void()> hook_ ABSL_GUARDED_BY(hook_mu_);
};

// A batch buffer that is one slot of a ring.
class ShmSlotBuffer : public service::BatchBuffer {
 public:
  ShmSlotBuffer(std::shared_ptr<ShmRing> ring, uint32_t slot, uint8_t* data)
      : ring_(std::move(ring)), slot_(slot), data_(data) {}
  uint8_t* data() override { return data_; }
  size_t capacity() const override { return ring_->slot_bytes(); }
  uint32_t slot() const { return slot_; }

 private:
  const std::shared_ptr<ShmRing> ring_;  // Keeps the mapping alive.
  const uint32_t slot_;
  uint8_t* const data_;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHM_SHM_RING_H_
