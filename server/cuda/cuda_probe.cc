#include "server/cuda/cuda_probe.h"

#include <cctype>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#ifndef STOKER_CUDA_BUILT
#error "STOKER_CUDA_BUILT must be 0 or 1 (set by server/cuda/CMakeLists.txt)"
#endif
#if STOKER_CUDA_BUILT
#include <cuda_runtime_api.h>
#endif

namespace stoker::cuda {
namespace {

// This absl's string_view is not std::string_view.
absl::string_view Abs(std::string_view s) { return {s.data(), s.size()}; }

#if STOKER_CUDA_BUILT
std::string RuntimeError(std::string_view call, cudaError_t error) {
  return absl::StrCat(Abs(call), " failed with ", cudaGetErrorName(error), " (",
                      cudaGetErrorString(error), ")");
}
#endif

CudaProbe Ask() {
  CudaProbe probe;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    probe.visible_devices = visible;
  }
#if !STOKER_CUDA_BUILT
  probe.driver_error = std::string(kNotBuiltReason);
#else
  probe.built = true;
  probe.runtime_version = CUDART_VERSION;
  // 0 with cudaSuccess when no driver is installed.
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) {
    probe.driver_version = driver;
  }
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    probe.driver_error = RuntimeError("cudaGetDeviceCount", e);
    if (probe.driver_version == 0) {
      absl::StrAppend(&probe.driver_error,
                      "; cudaDriverGetVersion reports no NVIDIA driver "
                      "(libcuda.so.1) on this machine or in this container");
    }
    // Clears the runtime's sticky last error, so that a later caller's
    // cudaGetLastError does not report ours.
    cudaGetLastError();
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      // The GPUs that answered are still listed and servable.
      absl::StrAppend(
          &probe.driver_error, probe.driver_error.empty() ? "" : "; ",
          RuntimeError(absl::StrCat("cudaGetDeviceProperties(", i, ")"), e));
      cudaGetLastError();
      continue;
    }
    std::array<unsigned char, 16> uuid;
    for (int b = 0; b < 16; ++b) {
      uuid[b] = static_cast<unsigned char>(prop.uuid.bytes[b]);
    }
    probe.gpus.push_back(GpuInfo{i, FormatGpuUuid(uuid), prop.name,
                                 static_cast<uint64_t>(prop.totalGlobalMem)});
  }
#endif
  return probe;
}

// The 32 hex digits of a UUID, lower case, without prefix or dashes; empty
// when `uuid` is not a UUID.
std::string UuidDigits(std::string_view uuid) {
  for (std::string_view prefix : {"GPU-", "MIG-", "gpu-", "mig-"}) {
    if (uuid.substr(0, prefix.size()) == prefix) {
      uuid.remove_prefix(prefix.size());
      break;
    }
  }
  // 8-4-4-4-12.
  static constexpr int kDashes[] = {8, 13, 18, 23};
  if (uuid.size() != 36) return "";
  std::string digits;
  for (int i = 0; i < 36; ++i) {
    const bool dash_here = i == kDashes[0] || i == kDashes[1] ||
                           i == kDashes[2] || i == kDashes[3];
    const unsigned char c = static_cast<unsigned char>(uuid[i]);
    if (dash_here) {
      if (c != '-') return "";
    } else if (std::isxdigit(c)) {
      digits.push_back(static_cast<char>(std::tolower(c)));
    } else {
      return "";
    }
  }
  return digits;
}

std::string VersionText(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string GpuText(const GpuInfo& gpu) {
  return absl::StrFormat(
      "%d %s %s %.1f GiB", gpu.index, gpu.uuid, gpu.name,
      static_cast<double>(gpu.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

bool CudaSupportBuilt() { return STOKER_CUDA_BUILT != 0; }

const CudaProbe& ProbeCuda() {
  // Never destroyed: threads may still ask while the process exits.
  static const CudaProbe& probe = *new CudaProbe(Ask());
  return probe;
}

absl::Status CheckGpuServable(const CudaProbe& probe, std::string_view uuid) {
  return FindServableGpu(probe, uuid).status();
}

absl::StatusOr<GpuInfo> FindServableGpu(const CudaProbe& probe,
                                        std::string_view uuid) {
  const std::string wanted = UuidDigits(uuid);
  if (wanted.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU UUID '", Abs(uuid),
        "' is not of the form GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx "
        "(nvidia-smi -L prints it)"));
  }
  if (!probe.built) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot serve GPU ", Abs(uuid), ": ", kNotBuiltReason));
  }
  for (const GpuInfo& gpu : probe.gpus) {
    if (UuidDigits(gpu.uuid) == wanted) return gpu;
  }
  if (!probe.driver_error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot serve GPU ", Abs(uuid),
                     ": the CUDA driver: ", probe.driver_error));
  }
  std::vector<std::string> seen;
  for (const GpuInfo& gpu : probe.gpus) seen.push_back(gpu.uuid);
  return absl::FailedPreconditionError(absl::StrCat(
      "no GPU with UUID ", Abs(uuid), " (this stokerd sees: ",
      seen.empty() ? "none" : absl::StrJoin(seen, ", "),
      probe.visible_devices.has_value()
          ? absl::StrCat("; its CUDA_VISIBLE_DEVICES='", *probe.visible_devices,
                         "' hides the others")
          : "",
      ")"));
}

absl::Status CheckGpuServable(std::string_view uuid) {
  return CheckGpuServable(ProbeCuda(), uuid);
}

std::string DescribeCuda(const CudaProbe& probe) {
  if (!probe.built) {
    return "not built (STOKER_CUDA=OFF or no toolkit at build time)";
  }
  std::string line =
      absl::StrCat("built (runtime ", VersionText(probe.runtime_version), ")");
  absl::StrAppend(&line, ", driver ",
                  probe.driver_version == 0
                      ? std::string("none")
                      : VersionText(probe.driver_version));
  if (probe.gpus.empty()) {
    absl::StrAppend(&line, "; no GPU usable");
  } else {
    std::vector<std::string> gpus;
    for (const GpuInfo& gpu : probe.gpus) gpus.push_back(GpuText(gpu));
    absl::StrAppend(&line, "; ", probe.gpus.size(),
                    probe.gpus.size() == 1 ? " GPU: " : " GPUs: ",
                    absl::StrJoin(gpus, "; "));
  }
  if (!probe.driver_error.empty()) {
    absl::StrAppend(&line, ": ", probe.driver_error);
  }
  if (probe.visible_devices.has_value()) {
    absl::StrAppend(&line, " (CUDA_VISIBLE_DEVICES='", *probe.visible_devices,
                    "')");
  }
  return line;
}

std::string FormatGpuUuid(const std::array<unsigned char, 16>& bytes) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    absl::StrAppendFormat(&out, "%02x", bytes[i]);
  }
  return out;
}

}  // namespace stoker::cuda
