#include "server/transport/cuda_ipc/pinned_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker::transport {

absl::Status CudaError(const std::string& call, cudaError_t e) {
  cudaGetLastError();  // Clears a sticky-free error for the next call.
  return absl::InternalError(absl::StrCat(call, " failed with ",
                                          cudaGetErrorName(e), " (",
                                          cudaGetErrorString(e), ")"));
}

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

absl::StatusOr<std::shared_ptr<PinnedPool>> PinnedPool::Create(
    uint32_t count, size_t bytes) {
  const size_t stride = (bytes + 4095) / 4096 * 4096;
  void* base = nullptr;
  if (cudaError_t e = cudaHostAlloc(&base, stride * count,
                                    cudaHostAllocPortable);
      e != cudaSuccess) {
    return CudaError(absl::StrCat("cudaHostAlloc(", Mib(stride * count), ")"),
                     e);
  }
  return std::shared_ptr<PinnedPool>(
      new PinnedPool(static_cast<uint8_t*>(base), count, stride, bytes));
}

PinnedPool::~PinnedPool() { cudaFreeHost(base_); }

std::unique_ptr<service::BatchBuffer> PinnedPool::Take() {
  uint32_t place;
  {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return nullptr;
    place = free_.back();
    free_.pop_back();
  }
  return std::make_unique<Buffer>(shared_from_this(), place);
}

}  // namespace stoker::transport
