// The device normalize kernel (device_normalize.h): one thread per pixel,
// grid-stride, the table in shared memory.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/transport/cuda_ipc/device_normalize.h"
#include "server/transport/cuda_ipc/normalize_pixel.h"

namespace stoker::transport {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill an H200 (132 SMs) several times over; the loop
// strides over the rest.
constexpr size_t kMaxBlocks = 4096;

template <typename T>
__global__ void NormalizeKernel(const uint32_t* __restrict__ table,
                                const uint8_t* __restrict__ src, size_t pixels,
                                size_t plane, bool chw, T* __restrict__ dst) {
  __shared__ uint32_t entries[NormalizeTable::kEntries];
  for (int i = threadIdx.x; i < static_cast<int>(NormalizeTable::kEntries);
       i += blockDim.x) {
    entries[i] = table[i];
  }
  __syncthreads();
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t p = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       p < pixels; p += stride) {
    NormalizePixel<T>(entries, src, p, plane, chw, dst);
  }
}

template <typename T>
void Launch(const NormalizePlan& plan, const uint32_t* table,
            const uint8_t* src, uint32_t samples, void* dst,
            cudaStream_t stream) {
  const size_t plane = static_cast<size_t>(plan.height) * plan.width;
  const size_t pixels = plane * samples;
  const size_t blocks =
      std::min(kMaxBlocks, (pixels + kThreads - 1) / kThreads);
  NormalizeKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      table, src, pixels, plane, plan.chw, static_cast<T*>(dst));
}

}  // namespace

absl::Status NormalizeOnDevice(const NormalizePlan& plan,
                               const uint32_t* device_table,
                               const uint8_t* device_src, uint32_t samples,
                               void* device_dst, CUstream_st* stream) {
  if (samples == 0 || plan.height <= 0 || plan.width <= 0) {
    return absl::OkStatus();
  }
  switch (DeviceDTypeSize(plan.dtype)) {
    case 1:
      Launch<uint8_t>(plan, device_table, device_src, samples, device_dst,
                      stream);
      break;
    case 2:
      Launch<uint16_t>(plan, device_table, device_src, samples, device_dst,
                       stream);
      break;
    default:
      Launch<uint32_t>(plan, device_table, device_src, samples, device_dst,
                       stream);
      break;
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat(
        "the normalize kernel (", std::string(DeviceDTypeName(plan.dtype)),
        ", ", samples, " x ", plan.height, "x", plan.width,
        ") failed to launch: ", cudaGetErrorName(e), " (",
        cudaGetErrorString(e), ")"));
  }
  return absl::OkStatus();
}

}  // namespace stoker::transport
