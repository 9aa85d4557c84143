#include "server/cuda/cuda_driver.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace stoker::cuda {
namespace {

std::string RuntimeError(const char* call, cudaError_t error) {
  return absl::StrCat(call, " failed with ", cudaGetErrorName(error), " (",
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
    // Clears the runtime's sticky last error, so that a later caller's
    // cudaGetLastError does not report ours.
    cudaGetLastError();
    return;
  }
  *fn = reinterpret_cast<F>(address);
}

}  // namespace

const DriverApi& Driver() {
  // Never destroyed: rings may be torn down while the process exits.
  static const DriverApi* driver = [] {
    auto* d = new DriverApi;
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
    Get("cuMemImportFromShareableHandle", &d->MemImportFromShareableHandle,
        &s);
    return d;
  }();
  return *driver;
}

absl::Status DriverError(const DriverApi& d, const char* call, CUresult r) {
  const char* name = nullptr;
  if (d.GetErrorName == nullptr || d.GetErrorName(r, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  return absl::InternalError(
      absl::StrCat(call, " failed with ", name != nullptr ? name : "CUresult ",
                   name != nullptr ? "" : absl::StrCat(static_cast<int>(r))));
}

absl::StatusOr<CUdeviceptr> MapReadWrite(const DriverApi& d,
                                         CUmemGenericAllocationHandle handle,
                                         size_t bytes, size_t alignment,
                                         CUdevice device) {
  CUdeviceptr address = 0;
  if (CUresult r = d.MemAddressReserve(&address, bytes, alignment, 0, 0);
      r != CUDA_SUCCESS) {
    return DriverError(d, "cuMemAddressReserve", r);
  }
  if (CUresult r = d.MemMap(address, bytes, 0, handle, 0); r != CUDA_SUCCESS) {
    d.MemAddressFree(address, bytes);
    return DriverError(d, "cuMemMap", r);
  }
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.MemSetAccess(address, bytes, &access, 1);
      r != CUDA_SUCCESS) {
    UnmapAndRelease(d, address, bytes, 0);
    return DriverError(d, "cuMemSetAccess", r);
  }
  return address;
}

void UnmapAndRelease(const DriverApi& d, CUdeviceptr address, size_t bytes,
                     CUmemGenericAllocationHandle handle) {
  if (address != 0) {
    d.MemUnmap(address, bytes);
    d.MemAddressFree(address, bytes);
  }
  if (handle != 0) d.MemRelease(handle);
}

}  // namespace stoker::cuda
