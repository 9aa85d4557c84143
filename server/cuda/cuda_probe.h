// What this process can do with CUDA: whether stokerd was built with CUDA
// support, what the driver says, and which GPUs it sees. stokerd prints it
// for --version and logs it at startup; the cuda_ipc transport calls
// CheckGpuServable before it allocates a ring on the GPU a trainer names,
// and refuses the stream with the returned status when it is not OK.
//
// Compiled with or without the CUDA toolkit: CMake sets STOKER_CUDA_BUILT to
// 1 when the toolkit was found (STOKER_CUDA=AUTO or ON), else to 0, and then
// nothing here touches CUDA. Only the runtime API is used, linked statically
// (cudart_static), which loads libcuda.so.1 on first use: a binary built
// with CUDA starts on a machine without a GPU or driver, and ProbeCuda
// reports the driver's error there.
//
// Thread-safe: ProbeCuda asks the runtime once per process (the runtime
// enumerates the GPUs once; its answer cannot change while the process
// runs) and every later call returns that answer; the other functions are
// pure.
#ifndef STOKER_SERVER_CUDA_CUDA_PROBE_H_
#define STOKER_SERVER_CUDA_CUDA_PROBE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker::cuda {

// One GPU as the CUDA runtime of this process sees it.
struct GpuInfo {
  // The runtime's ordinal in this process. It depends on CUDA_VISIBLE_DEVICES,
  // which differs between processes: name a GPU across processes by uuid.
  int index = 0;
  // As nvidia-smi -L prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
  std::string uuid;
  std::string name;  // "NVIDIA H200".
  uint64_t total_memory_bytes = 0;
};

struct CudaProbe {
  // Whether this binary was built with CUDA support.
  bool built = false;
  // The runtime this binary was built with, as CUDART_VERSION (13000 for
  // 13.0); 0 when !built.
  int runtime_version = 0;
  // The latest CUDA version the driver supports (cudaDriverGetVersion),
  // 0 when there is no driver or !built.
  int driver_version = 0;
  // Empty when the runtime enumerated the GPUs; else why it could not, in
  // the runtime's words: "cudaGetDeviceCount: cudaErrorInsufficientDriver:
  // CUDA driver version is insufficient for CUDA runtime version". Also set,
  // with gpus empty, when !built.
  std::string driver_error;
  // The GPUs this process sees, by index.
  std::vector<GpuInfo> gpus;
  // CUDA_VISIBLE_DEVICES of this process when set, because it hides GPUs.
  std::optional<std::string> visible_devices;
};

// The message of every refusal when !built.
inline constexpr char kNotBuiltReason[] =
    "this stokerd was built without CUDA support (STOKER_CUDA=OFF or no "
    "toolkit at build time)";

// Whether this binary was built with CUDA support.
bool CudaSupportBuilt();

// The answer of the CUDA runtime for this process, asked on the first call.
// Never fails and never aborts: without a driver or GPU, driver_error says
// why.
const CudaProbe& ProbeCuda();

// OK when the GPU named by `uuid` is one that `probe` lists. Else:
//   INVALID_ARGUMENT    `uuid` is not a GPU UUID;
//   FAILED_PRECONDITION kNotBuiltReason, or the driver's error, or
//                       "no GPU with UUID ... (this stokerd sees: ...)".
// `uuid` is compared as its 32 hex digits, case-blind, with or without the
// "GPU-" (or "MIG-") prefix nvidia-smi prints: torch prints it without.
absl::Status CheckGpuServable(const CudaProbe& probe, std::string_view uuid);
// The same check, returning the GPU when it passes.
absl::StatusOr<GpuInfo> FindServableGpu(const CudaProbe& probe,
                                        std::string_view uuid);

// CheckGpuServable(ProbeCuda(), uuid): what the cuda_ipc transport calls.
absl::Status CheckGpuServable(std::string_view uuid);

// One line for --version and the startup log: "built (runtime 13.0),
// driver 13.0, 1 GPU: 0 GPU-... NVIDIA H200 139.8 GiB", or why not.
std::string DescribeCuda(const CudaProbe& probe);

// "GPU-" and the 16 bytes as 8-4-4-4-12 lower-case hex digits.
std::string FormatGpuUuid(const std::array<unsigned char, 16>& bytes);

}  // namespace stoker::cuda

#endif  // STOKER_SERVER_CUDA_CUDA_PROBE_H_
