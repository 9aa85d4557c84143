#include "server/transport/cuda_ipc/device_ring_memory.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/cuda/cuda_driver.h"

namespace stoker::transport {
namespace {

using cuda::DriverApi;
using cuda::DriverError;

std::string RuntimeError(std::string_view call, cudaError_t error) {
  return absl::StrCat(absl::string_view(call.data(), call.size()),
                      " failed with ", cudaGetErrorName(error), " (",
                      cudaGetErrorString(error), ")");
}

// Makes `device` current on this thread, with its primary context, which
// the driver calls below work in.
absl::Status UseDevice(int device) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        RuntimeError(absl::StrCat("cudaSetDevice(", device, ")"), e));
  }
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(RuntimeError("cudaFree(0)", e));
  }
  return absl::OkStatus();
}

// A ring's allocation on `dev`: device memory exportable as a descriptor.
CUmemAllocationProp VmmProp(CUdevice dev) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

}  // namespace

absl::StatusOr<GpuSharingSupport> QuerySharingSupport(int device) {
  const DriverApi& d = cuda::Driver();
  if (!d.status.ok()) return d.status;
  if (absl::Status s = UseDevice(device); !s.ok()) return s;
  CUdevice dev;
  if (CUresult r = d.DeviceGet(&dev, device); r != CUDA_SUCCESS) {
    return DriverError(d, "cuDeviceGet", r);
  }
  int vmm = 0, fd = 0;
  if (CUresult r = d.DeviceGetAttribute(
          &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuDeviceGetAttribute", r);
  }
  if (CUresult r = d.DeviceGetAttribute(
          &fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
          dev);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuDeviceGetAttribute", r);
  }
  GpuSharingSupport support{vmm != 0, fd != 0};
  if (support.vmm && support.posix_fd) {
    const CUmemAllocationProp prop = VmmProp(dev);
    if (CUresult r = d.MemGetAllocationGranularity(
            &support.vmm_granularity, &prop,
            CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        r != CUDA_SUCCESS) {
      return DriverError(d, "cuMemGetAllocationGranularity", r);
    }
  }
  return support;
}

absl::StatusOr<std::unique_ptr<DeviceRingMemory>> DeviceRingMemory::Create(
    int device, size_t bytes, HandleKind kind) {
  if (absl::Status s = UseDevice(device); !s.ok()) return s;
  std::unique_ptr<DeviceRingMemory> memory(new DeviceRingMemory(kind, device));
  if (kind == HandleKind::kLegacyIpc) {
    void* data = nullptr;
    if (cudaError_t e = cudaMalloc(&data, bytes); e != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(RuntimeError("cudaMalloc", e));
    }
    memory->data_ = static_cast<uint8_t*>(data);
    memory->bytes_ = bytes;
    cudaIpcMemHandle_t handle;
    if (cudaError_t e = cudaIpcGetMemHandle(&handle, data); e != cudaSuccess) {
      cudaGetLastError();
      return absl::InternalError(RuntimeError("cudaIpcGetMemHandle", e));
    }
    memory->legacy_handle_.assign(handle.reserved, sizeof(handle.reserved));
    return memory;
  }
  const DriverApi& d = cuda::Driver();
  if (!d.status.ok()) return d.status;
  CUdevice dev;
  if (CUresult r = d.DeviceGet(&dev, device); r != CUDA_SUCCESS) {
    return DriverError(d, "cuDeviceGet", r);
  }
  const CUmemAllocationProp prop = VmmProp(dev);
  size_t granularity = 0;
  if (CUresult r = d.MemGetAllocationGranularity(
          &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuMemGetAllocationGranularity", r);
  }
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  if (CUresult r = d.MemCreate(&handle, size, &prop, 0); r != CUDA_SUCCESS) {
    return DriverError(d, "cuMemCreate", r);
  }
  memory->vmm_handle_ = handle;
  absl::StatusOr<CUdeviceptr> address =
      cuda::MapReadWrite(d, handle, size, granularity, dev);
  if (!address.ok()) return address.status();
  memory->bytes_ = size;
  memory->data_ = reinterpret_cast<uint8_t*>(*address);
  int fd = -1;
  if (CUresult r = d.MemExportToShareableHandle(
          &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuMemExportToShareableHandle", r);
  }
  memory->fd_ = fd;
  return memory;
}

DeviceRingMemory::~DeviceRingMemory() {
  if (fd_ >= 0) close(fd_);
  if (kind_ == HandleKind::kLegacyIpc) {
    if (data_ != nullptr) cudaFree(data_);
    return;
  }
  cuda::UnmapAndRelease(cuda::Driver(), reinterpret_cast<CUdeviceptr>(data_),
                        bytes_, vmm_handle_);
}

}  // namespace stoker::transport
