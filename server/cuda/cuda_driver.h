// The CUDA driver calls that both sides of a cuda_ipc ring make, reached
// through the runtime (cudaGetDriverEntryPointByVersion, ABI of CUDA 12.0,
// which every driver of CUDA 12 and 13 provides): nothing links libcuda, so
// binaries start on machines without a driver. One table for the daemon's
// ring (server/transport/cuda_ipc/device_ring_memory.cc), which creates and
// exports the allocation, and the C++ client's mapping of it
// (client/lib/cuda_ipc/device_mapping.cc), which imports it; both map it and
// tear it down the same way, here.
//
// Only built with CUDA (STOKER_CUDA_ENABLED): the library stoker_cuda_driver,
// linked by the cuda_ipc transport and by the client library.
//
// Thread-safe: the table is looked up once per process and then constant;
// the other functions keep no state.
#ifndef STOKER_SERVER_CUDA_CUDA_DRIVER_H_
#define STOKER_SERVER_CUDA_CUDA_DRIVER_H_

#include <cuda.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker::cuda {

struct DriverApi {
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuMemGetAllocationGranularity) MemGetAllocationGranularity =
      nullptr;
  decltype(&::cuMemCreate) MemCreate = nullptr;
  decltype(&::cuMemRelease) MemRelease = nullptr;
  decltype(&::cuMemAddressReserve) MemAddressReserve = nullptr;
  decltype(&::cuMemAddressFree) MemAddressFree = nullptr;
  decltype(&::cuMemMap) MemMap = nullptr;
  decltype(&::cuMemUnmap) MemUnmap = nullptr;
  decltype(&::cuMemSetAccess) MemSetAccess = nullptr;
  decltype(&::cuMemExportToShareableHandle) MemExportToShareableHandle =
      nullptr;
  decltype(&::cuMemImportFromShareableHandle) MemImportFromShareableHandle =
      nullptr;
  // OK when every call above was found. Else FAILED_PRECONDITION naming the
  // first one the driver lacks and why ("the CUDA driver has no cuMemMap
  // (ABI 12.0): ..."), and the calls from that one on are null.
  absl::Status status;
};

// The table of this process, looked up on the first call.
const DriverApi& Driver();

// INTERNAL: "`call` failed with CUDA_ERROR_..." (the driver's name of `r`,
// or "CUresult N" where it has none).
absl::Status DriverError(const DriverApi& d, const char* call, CUresult r);

// Maps the allocation `handle` of `bytes` at a new address range reserved
// with `alignment` (0: the driver's default) and makes it readable and
// writable from `device` (a CUdevice). On an error nothing of the range is
// left; `handle` is the caller's either way.
// REQUIRES: d.status is OK; the device's context is current.
absl::StatusOr<CUdeviceptr> MapReadWrite(const DriverApi& d,
                                         CUmemGenericAllocationHandle handle,
                                         size_t bytes, size_t alignment,
                                         CUdevice device);

// The VMM teardown: unmaps and frees the range MapReadWrite returned (when
// `address` is not 0), then releases `handle` (when not 0). The memory
// itself lives on while another process still maps it.
void UnmapAndRelease(const DriverApi& d, CUdeviceptr address, size_t bytes,
                     CUmemGenericAllocationHandle handle);

}  // namespace stoker::cuda

#endif  // STOKER_SERVER_CUDA_CUDA_DRIVER_H_
