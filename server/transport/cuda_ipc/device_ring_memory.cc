#include "server/transport/cuda_ipc/device_ring_memory.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker::transport {
namespace {

// The driver calls used here, as the runtime hands them out (ABI of CUDA
// 12.0, which every driver of CUDA 12 and 13 provides).
struct Driver {
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
  absl::Status status;  // Why the driver cannot be used, if it cannot.
};

std::string RuntimeError(std::string_view call, cudaError_t error) {
  return absl::StrCat(absl::string_view(call.data(), call.size()),
                      " failed with ", cudaGetErrorName(error), " (",
                      cudaGetErrorString(error), ")");
}

template <typename F>
void Get(const char* symbol, F* fn, absl::Status* status) {
  if (!status->ok()) return;
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(
      symbol, &address, 12000, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess ||
      address == nullptr) {
    *status = absl::FailedPreconditionError(absl::StrCat(
        "the CUDA driver has no ", symbol, " (ABI 12.0): ",
        e != cudaSuccess ? RuntimeError("cudaGetDriverEntryPointByVersion", e)
                         : "symbol not found"));
    cudaGetLastError();
    return;
  }
  *fn = reinterpret_cast<F>(address);
}

const Driver& TheDriver() {
  static const Driver* driver = [] {
    auto* d = new Driver;
    absl::Status& s = d->status;
    Get("cuDeviceGet", &d->DeviceGet, &s);
    Get("cuDeviceGetAttribute", &d->DeviceGetAttribute, &s);
    Get("cuGetErrorName", &d->GetErrorName, &s);
    Get("cuMemGetAllocationGranularity", &d->MemGetAllocationGranularity, &s);
    Get("cuMemCreate", &d->MemCreate, &s);
    Get("cuMemRelease", &d->MemRelease, &s);
    Get("cuMemAddressReserve", &d->MemAddressReserve, &s);
    Get("cuMemAddressFree", &d->MemAddressFree, &s);
    Get("cuMemMap", &d->MemMap, &s);
    Get("cuMemUnmap", &d->MemUnmap, &s);
    Get("cuMemSetAccess", &d->MemSetAccess, &s);
    Get("cuMemExportToShareableHandle", &d->MemExportToShareableHandle, &s);
    return d;
  }();
  return *driver;
}

absl::Status DriverError(const Driver& d, const char* call, CUresult r) {
  const char* name = nullptr;
  if (d.GetErrorName == nullptr || d.GetErrorName(r, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  return absl::InternalError(
      absl::StrCat(call, " failed with ", name != nullptr ? name : "CUresult ",
                   name != nullptr ? "" : absl::StrCat(static_cast<int>(r))));
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
  const Driver& d = TheDriver();
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
  const Driver& d = TheDriver();
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
  CUdeviceptr address = 0;
  if (CUresult r = d.MemAddressReserve(&address, size, granularity, 0, 0);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuMemAddressReserve", r);
  }
  memory->bytes_ = size;
  memory->data_ = reinterpret_cast<uint8_t*>(address);
  if (CUresult r = d.MemMap(address, size, 0, handle, 0); r != CUDA_SUCCESS) {
    d.MemAddressFree(address, size);
    memory->data_ = nullptr;
    return DriverError(d, "cuMemMap", r);
  }
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.MemSetAccess(address, size, &access, 1);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuMemSetAccess", r);
  }
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
  const Driver& d = TheDriver();
  if (data_ != nullptr) {
    const CUdeviceptr address = reinterpret_cast<CUdeviceptr>(data_);
    d.MemUnmap(address, bytes_);
    d.MemAddressFree(address, bytes_);
  }
  if (vmm_handle_ != 0) d.MemRelease(vmm_handle_);
}

}  // namespace stoker::transport
