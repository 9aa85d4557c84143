// The client's side of a cuda_ipc ring (CudaIpcRing in local_transports.proto):
// the daemon's device allocation mapped into this process, on the GPU the
// stream named, from the descriptor the daemon handed over (VMM: imported with
// cuMemImportFromShareableHandle, mapped with cuMemAddressReserve + cuMemMap,
// made readable and writable with cuMemSetAccess) or from the legacy handle
// (cudaIpcOpenMemHandle). The daemon keeps owning the memory; a mapping only
// keeps it alive until unmapped.
//
// The driver calls, the mapping and the teardown are the daemon's
// (server/cuda/cuda_driver.h, reached through the runtime), so the library
// links no libcuda. Built without CUDA, every call is FAILED_PRECONDITION
// saying so.
//
// Thread-safe: a mapping is immutable; views of it may be used anywhere.
#ifndef STOKER_CLIENT_LIB_CUDA_IPC_DEVICE_MAPPING_H_
#define STOKER_CLIENT_LIB_CUDA_IPC_DEVICE_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker {

// The CUDA runtime ordinal, in this process, of the GPU with `uuid` (as
// nvidia-smi -L prints it, or without "GPU-"). NOT_FOUND naming the GPUs
// this process sees; FAILED_PRECONDITION without CUDA or a driver.
absl::StatusOr<int> FindGpuByUuid(const std::string& uuid);
// "GPU-..." of the calling thread's current CUDA device.
absl::StatusOr<std::string> CurrentGpuUuid();

// A ring mapped on one GPU.
class DeviceMapping {
 public:
  // Maps `ring` on `device`: from `fd` (which the mapping then owns and
  // closes) for CUDA_HANDLE_VMM_POSIX_FD, from ring.legacy_handle() for
  // CUDA_HANDLE_LEGACY_IPC (fd < 0).
  static absl::StatusOr<std::shared_ptr<DeviceMapping>> Map(
      const v1::CudaIpcRing& ring, int fd, int device);
  ~DeviceMapping();
  DeviceMapping(const DeviceMapping&) = delete;
  DeviceMapping& operator=(const DeviceMapping&) = delete;

  // Device addresses in this process.
  uint8_t* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  DeviceMapping(v1::CudaHandleKind kind, int device)
      : kind_(kind), device_(device) {}

  const v1::CudaHandleKind kind_;
  const int device_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  unsigned long long vmm_handle_ = 0;  // CUmemGenericAllocationHandle.
};

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_CUDA_IPC_DEVICE_MAPPING_H_
