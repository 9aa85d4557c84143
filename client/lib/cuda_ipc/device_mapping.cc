#include "client/lib/cuda_ipc/device_mapping.h"

#ifndef STOKER_CUDA_BUILT
#error "STOKER_CUDA_BUILT must be 0 or 1 (set by client/CMakeLists.txt)"
#endif

#include <unistd.h>

#include <cctype>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if STOKER_CUDA_BUILT
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "server/cuda/cuda_driver.h"
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

absl::Status RuntimeError(absl::string_view call, cudaError_t e) {
  cudaGetLastError();
  return absl::FailedPreconditionError(
      absl::StrCat(call, " failed with ", cudaGetErrorName(e), " (",
                   cudaGetErrorString(e), ")"));
}

// The driver's error, saying what failed.
absl::Status MapError(absl::Status status) {
  return absl::Status(status.code(), absl::StrCat("mapping the cuda_ipc ring: ",
                                                  status.message()));
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
  const cuda::DriverApi& d = cuda::Driver();
  if (!d.status.ok()) {
    close(fd);
    return MapError(d.status);
  }
  CUmemGenericAllocationHandle handle = 0;
  const CUresult imported = d.MemImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  // The import holds the allocation; the descriptor is no longer needed.
  close(fd);
  if (imported != CUDA_SUCCESS) {
    return MapError(
        cuda::DriverError(d, "cuMemImportFromShareableHandle", imported));
  }
  mapping->vmm_handle_ = handle;
  CUdevice dev;
  if (CUresult r = d.DeviceGet(&dev, device); r != CUDA_SUCCESS) {
    return MapError(cuda::DriverError(d, "cuDeviceGet", r));
  }
  const size_t size = ring.ring_bytes();
  absl::StatusOr<CUdeviceptr> address =
      cuda::MapReadWrite(d, handle, size, 0, dev);
  if (!address.ok()) return MapError(address.status());
  mapping->bytes_ = size;
  mapping->base_ = reinterpret_cast<uint8_t*>(*address);
  return mapping;
}

DeviceMapping::~DeviceMapping() {
  if (kind_ == v1::CUDA_HANDLE_LEGACY_IPC) {
    if (base_ != nullptr) cudaIpcCloseMemHandle(base_);
    return;
  }
  cuda::UnmapAndRelease(cuda::Driver(), reinterpret_cast<CUdeviceptr>(base_),
                        bytes_, vmm_handle_);
}

#endif  // STOKER_CUDA_BUILT

}  // namespace stoker
