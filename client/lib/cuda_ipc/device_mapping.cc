#include "client/lib/cuda_ipc/device_mapping.h"

#ifndef STOKER_CUDA_BUILT
#error "STOKER_CUDA_BUILT must be 0 or 1 (set by client/CMakeLists.txt)"
#endif

#include <unistd.h>

#include <cctype>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if STOKER_CUDA_BUILT
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace stoker {

#if !STOKER_CUDA_BUILT

namespace {
constexpr char kNotBuilt[] =
    "this Stoker client was built without CUDA support (STOKER_CUDA=OFF or "
    "no toolkit at build time)";
}  // namespace

absl::StatusOr<int> FindGpuByUuid(const std::string& uuid) {
  return absl::FailedPreconditionError(kNotBuilt);
}

absl::StatusOr<std::string> CurrentGpuUuid() {
  return absl::FailedPreconditionError(kNotBuilt);
}

absl::StatusOr<std::shared_ptr<DeviceMapping>> DeviceMapping::Map(
    const v1::CudaIpcRing& ring, int fd, int device) {
  if (fd >= 0) close(fd);
  return absl::FailedPreconditionError(kNotBuilt);
}

DeviceMapping::~DeviceMapping() = default;

#else  // STOKER_CUDA_BUILT

namespace {

// The driver calls the import needs, as the runtime hands them out (ABI of
// CUDA 12.0).
struct Driver {
  decltype(&::cuMemImportFromShareableHandle) MemImportFromShareableHandle =
      nullptr;
  decltype(&::cuMemRelease) MemRelease = nullptr;
  decltype(&::cuMemAddressReserve) MemAddressReserve = nullptr;
  decltype(&::cuMemAddressFree) MemAddressFree = nullptr;
  decltype(&::cuMemMap) MemMap = nullptr;
  decltype(&::cuMemUnmap) MemUnmap = nullptr;
  decltype(&::cuMemSetAccess) MemSetAccess = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  std::string missing;  // The first call the driver lacks.
};

const Driver& TheDriver() {
  static const Driver* driver = [] {
    auto* d = new Driver;
    auto get = [d](const char* symbol, auto* fn) {
      if (!d->missing.empty()) return;
      void* address = nullptr;
      cudaDriverEntryPointQueryResult found =
          cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000,
                                           cudaEnableDefault,
                                           &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess || address == nullptr) {
        cudaGetLastError();
        d->missing = symbol;
        return;
      }
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(address);
    };
    get("cuMemImportFromShareableHandle", &d->MemImportFromShareableHandle);
    get("cuMemRelease", &d->MemRelease);
    get("cuMemAddressReserve", &d->MemAddressReserve);
    get("cuMemAddressFree", &d->MemAddressFree);
    get("cuMemMap", &d->MemMap);
    get("cuMemUnmap", &d->MemUnmap);
    get("cuMemSetAccess", &d->MemSetAccess);
    get("cuDeviceGet", &d->DeviceGet);
    return d;
  }();
  return *driver;
}

absl::Status RuntimeError(absl::string_view call, cudaError_t e) {
  cudaGetLastError();
  return absl::FailedPreconditionError(
      absl::StrCat(call, " failed with ", cudaGetErrorName(e), " (",
                   cudaGetErrorString(e), ")"));
}

absl::Status DriverError(const char* call, CUresult r) {
  return absl::InternalError(absl::StrCat("mapping the cuda_ipc ring: ", call,
                                          " failed with CUresult ",
                                          static_cast<int>(r)));
}

// The 32 hex digits of a UUID, lower case; empty if it is none.
std::string Digits(absl::string_view uuid) {
  if (absl::StartsWith(uuid, "GPU-") || absl::StartsWith(uuid, "gpu-")) {
    uuid.remove_prefix(4);
  }
  std::string digits;
  for (char c : uuid) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
    digits.push_back(static_cast<char>(std::tolower(c)));
  }
  return digits.size() == 32 ? digits : "";
}

}  // namespace

absl::StatusOr<int> FindGpuByUuid(const std::string& uuid) {
  const std::string wanted = Digits(uuid);
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return RuntimeError("cudaGetDeviceCount", e);
  }
  std::vector<std::string> seen;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      return RuntimeError("cudaGetDeviceProperties", e);
    }
    std::string digits;
    for (int b = 0; b < 16; ++b) {
      absl::StrAppend(&digits,
                      absl::Hex(static_cast<unsigned char>(prop.uuid.bytes[b]),
                                absl::kZeroPad2));
    }
    if (!wanted.empty() && digits == wanted) return i;
    seen.push_back(digits);
  }
  return absl::NotFoundError(
      absl::StrCat("this process sees no GPU with UUID ", uuid, " (it sees ",
                   seen.empty() ? "none" : absl::StrJoin(seen, ", "), ")"));
}

absl::StatusOr<std::string> CurrentGpuUuid() {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return RuntimeError("cudaGetDevice", e);
  }
  cudaDeviceProp prop;
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    return RuntimeError("cudaGetDeviceProperties", e);
  }
  std::string uuid = "GPU-";
  for (int b = 0; b < 16; ++b) {
    if (b == 4 || b == 6 || b == 8 || b == 10) uuid.push_back('-');
    absl::StrAppend(&uuid,
                    absl::Hex(static_cast<unsigned char>(prop.uuid.bytes[b]),
                              absl::kZeroPad2));
  }
  return uuid;
}

absl::StatusOr<std::shared_ptr<DeviceMapping>> DeviceMapping::Map(
    const v1::CudaIpcRing& ring, int fd, int device) {
  std::shared_ptr<DeviceMapping> mapping(
      new DeviceMapping(ring.handle_kind(), device));
  // The device's primary context, which the driver calls below work in.
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) {
    if (fd >= 0) close(fd);
    return RuntimeError(absl::StrCat("cudaSetDevice(", device, ")"), e);
  }
  if (ring.handle_kind() == v1::CUDA_HANDLE_LEGACY_IPC) {
    if (fd >= 0) close(fd);
    cudaIpcMemHandle_t handle;
    if (ring.legacy_handle().size() != sizeof(handle.reserved)) {
      return absl::DataLossError(
          absl::StrCat("the cuda_ipc header's legacy_handle has ",
                       ring.legacy_handle().size(), " bytes, not ",
                       sizeof(handle.reserved)));
    }
    std::memcpy(handle.reserved, ring.legacy_handle().data(),
                sizeof(handle.reserved));
    void* base = nullptr;
    if (cudaError_t e =
            cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
        e != cudaSuccess) {
      return RuntimeError("cudaIpcOpenMemHandle", e);
    }
    mapping->base_ = static_cast<uint8_t*>(base);
    mapping->bytes_ = ring.ring_bytes();
    return mapping;
  }
  if (ring.handle_kind() != v1::CUDA_HANDLE_VMM_POSIX_FD || fd < 0) {
    if (fd >= 0) close(fd);
    return absl::DataLossError(
        absl::StrCat("a cuda_ipc ring of handle kind ",
                     v1::CudaHandleKind_Name(ring.handle_kind()),
                     " and descriptor ", fd, " cannot be mapped"));
  }
  const Driver& d = TheDriver();
  if (!d.missing.empty()) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver has no ", d.missing, " (ABI 12.0)"));
  }
  CUmemGenericAllocationHandle handle = 0;
  const CUresult imported = d.MemImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  // The import holds the allocation; the descriptor is no longer needed.
  close(fd);
  if (imported != CUDA_SUCCESS) {
    return DriverError("cuMemImportFromShareableHandle", imported);
  }
  mapping->vmm_handle_ = handle;
  const size_t size = ring.ring_bytes();
  CUdeviceptr address = 0;
  if (CUresult r = d.MemAddressReserve(&address, size, 0, 0, 0);
      r != CUDA_SUCCESS) {
    return DriverError("cuMemAddressReserve", r);
  }
  mapping->bytes_ = size;
  if (CUresult r = d.MemMap(address, size, 0, handle, 0); r != CUDA_SUCCESS) {
    d.MemAddressFree(address, size);
    return DriverError("cuMemMap", r);
  }
  mapping->base_ = reinterpret_cast<uint8_t*>(address);
  CUdevice dev;
  if (CUresult r = d.DeviceGet(&dev, device); r != CUDA_SUCCESS) {
    return DriverError("cuDeviceGet", r);
  }
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.MemSetAccess(address, size, &access, 1);
      r != CUDA_SUCCESS) {
    return DriverError("cuMemSetAccess", r);
  }
  return mapping;
}

DeviceMapping::~DeviceMapping() {
  if (kind_ == v1::CUDA_HANDLE_LEGACY_IPC) {
    if (base_ != nullptr) cudaIpcCloseMemHandle(base_);
    return;
  }
  const Driver& d = TheDriver();
  if (base_ != nullptr) {
    const CUdeviceptr address = reinterpret_cast<CUdeviceptr>(base_);
    d.MemUnmap(address, bytes_);
    d.MemAddressFree(address, bytes_);
  }
  if (vmm_handle_ != 0) d.MemRelease(vmm_handle_);
}

#endif  // STOKER_CUDA_BUILT

}  // namespace stoker
