// DeviceRingMemory: the device memory of one cuda_ipc ring, one allocation
// on one GPU, made shareable with the trainer's process in the kind
// ChooseSharing picked (ring_sharing.h):
//
//   kVmmPosixFd: cuMemCreate (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
//     rounded up to the GPU's recommended granularity, mapped here with
//     cuMemAddressReserve + cuMemMap + cuMemSetAccess, and exported once as
//     a file descriptor (cuMemExportToShareableHandle), which the
//     descriptor socket hands over with SCM_RIGHTS;
//   kLegacyIpc: cudaMalloc, and its cudaIpcGetMemHandle.
//
// The driver calls, the mapping and the teardown are those the client's
// mapping of the ring uses too (server/cuda/cuda_driver.h): nothing links
// libcuda, so binaries start on machines without a driver. Only built with
// CUDA.
//
// Thread-compatible: made and destroyed by one stream's delivery; data()
// may be used from any thread.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_RING_MEMORY_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_RING_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/transport/cuda_ipc/ring_sharing.h"

namespace stoker::transport {

// What GPU `device` (a runtime ordinal) says of VMM and descriptor
// handles. FAILED_PRECONDITION when the driver cannot be asked.
absl::StatusOr<GpuSharingSupport> QuerySharingSupport(int device);

class DeviceRingMemory {
 public:
  // At least `bytes` on GPU `device`, shareable as `kind`. The error names
  // the CUDA call that failed and its error, for ChooseSharing's reasons.
  static absl::StatusOr<std::unique_ptr<DeviceRingMemory>> Create(
      int device, size_t bytes, HandleKind kind);
  // Unmaps and frees; the memory lives on while a client has it mapped.
  ~DeviceRingMemory();
  DeviceRingMemory(const DeviceRingMemory&) = delete;
  DeviceRingMemory& operator=(const DeviceRingMemory&) = delete;

  HandleKind kind() const { return kind_; }
  int device() const { return device_; }
  // The allocation in this process's address space.
  uint8_t* data() const { return data_; }
  // Its size: `bytes` rounded up to the allocation granularity.
  size_t bytes() const { return bytes_; }
  // kVmmPosixFd: the exported descriptor, owned (the fd server sends
  // copies); -1 for kLegacyIpc.
  int fd() const { return fd_; }
  // kLegacyIpc: the 64 bytes of the cudaIpcMemHandle_t; else empty.
  const std::string& legacy_handle() const { return legacy_handle_; }

 private:
  DeviceRingMemory(HandleKind kind, int device)
      : kind_(kind), device_(device) {}

  const HandleKind kind_;
  const int device_;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  int fd_ = -1;
  std::string legacy_handle_;
  // kVmmPosixFd: the CUmemGenericAllocationHandle; 0 when none.
  unsigned long long vmm_handle_ = 0;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_RING_MEMORY_H_
