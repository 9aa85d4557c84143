// The cuda_ipc delivery's host side: the pinned buffers batches are built
// in (PinnedPool), and the CUDA runtime's errors as Status.
//
// Thread-safety: PinnedPool is thread-safe; a buffer is used by one thread
// at a time.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_PINNED_POOL_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_PINNED_POOL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/service/batch.h"

namespace stoker::transport {

// InternalError naming `call` and the runtime's error `e`; clears the
// runtime's last error.
absl::Status CudaError(const std::string& call, cudaError_t e);

// Returns CudaError from the enclosing function when `call` fails.
#define STOKER_CUDA_RETURN_IF_ERROR(call)                    \
  do {                                                       \
    if (cudaError_t stoker_e = (call); stoker_e != cudaSuccess) \
      return CudaError(#call, stoker_e);                     \
  } while (0)

// "12.5 MiB".
std::string Mib(uint64_t bytes);

// The pinned host buffers batches are built in: one cudaHostAlloc, one
// place per window entry. A buffer's place is free again when the buffer is
// dropped (the delivery drops it once its copy to the device completed).
class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  // `count` buffers of `bytes` each, in pinned host memory.
  static absl::StatusOr<std::shared_ptr<PinnedPool>> Create(uint32_t count,
                                                            size_t bytes);
  ~PinnedPool();

  std::unique_ptr<service::BatchBuffer> Take();
  void Return(uint32_t place) {
    absl::MutexLock lock(&mu_);
    free_.push_back(place);
  }

 private:
  class Buffer : public service::BatchBuffer {
   public:
    Buffer(std::shared_ptr<PinnedPool> pool, uint32_t place)
        : pool_(std::move(pool)), place_(place) {}
    ~Buffer() override { pool_->Return(place_); }
    uint8_t* data() override {
      return pool_->base_ + size_t{place_} * pool_->stride_;
    }
    size_t capacity() const override { return pool_->bytes_; }
    Home home() const override { return {pool_.get(), place_}; }

   private:
    const std::shared_ptr<PinnedPool> pool_;
    const uint32_t place_;
  };

  PinnedPool(uint8_t* base, uint32_t count, size_t stride, size_t bytes)
      : base_(base), stride_(stride), bytes_(bytes) {
    for (uint32_t i = count; i > 0; --i) free_.push_back(i - 1);
  }

  uint8_t* const base_;
  const size_t stride_;
  const size_t bytes_;
  absl::Mutex mu_;
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_PINNED_POOL_H_
