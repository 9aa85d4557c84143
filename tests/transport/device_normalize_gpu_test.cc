// The normalize kernel against its host reference, on a GPU: every dtype
// and layout, bit for bit, for a batch whose pixels take every byte value.
// Skips, saying why, where this process sees no GPU.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/cuda/cuda_probe.h"
#include "server/transport/cuda_ipc/device_normalize.h"
#include "tests/testing/images.h"

namespace stoker::transport {
namespace {

#define ASSERT_CUDA(call)                              \
  do {                                                 \
    const cudaError_t error = (call);                  \
    ASSERT_EQ(error, cudaSuccess)                      \
        << #call << ": " << cudaGetErrorString(error); \
  } while (0)

TEST(DeviceNormalizeGpuTest, KernelEqualsTheHostReference) {
  const cuda::CudaProbe& probe = cuda::ProbeCuda();
  if (probe.gpus.empty()) {
    GTEST_SKIP() << "needs a GPU: " << cuda::DescribeCuda(probe);
  }
  constexpr uint32_t kSamples = 7;
  constexpr int kHeight = 33, kWidth = 45;  // Not a multiple of a block.
  std::vector<uint8_t> pixels(kSamples * kHeight * kWidth * 3);
  for (size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<uint8_t>(stoker::testing::TestHash(i));
  }
  uint8_t* src = nullptr;
  uint32_t* table = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&src), pixels.size()));
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&table),
                         NormalizeTable::kEntries * 4));
  ASSERT_CUDA(cudaMalloc(&dst, pixels.size() * 4));
  ASSERT_CUDA(
      cudaMemcpy(src, pixels.data(), pixels.size(), cudaMemcpyHostToDevice));
  for (DeviceDType dtype : {DeviceDType::kUint8, DeviceDType::kFloat16,
                            DeviceDType::kBFloat16, DeviceDType::kFloat32}) {
    for (bool chw : {true, false}) {
      NormalizePlan plan;
      plan.dtype = dtype;
      plan.chw = chw;
      plan.height = kHeight;
      plan.width = kWidth;
      if (dtype != DeviceDType::kUint8) {
        plan.mean = {0.485, 0.456, 0.406};
        plan.std = {0.229, 0.224, 0.225};
      }
      const NormalizeTable host_table(plan);
      ASSERT_CUDA(cudaMemcpy(table, host_table.entries().data(),
                             NormalizeTable::kEntries * 4,
                             cudaMemcpyHostToDevice));
      ASSERT_CUDA(cudaMemset(dst, 0xee, pixels.size() * 4));
      const absl::Status launched =
          NormalizeOnDevice(plan, table, src, kSamples, dst, stream);
      ASSERT_TRUE(launched.ok()) << launched;
      ASSERT_CUDA(cudaStreamSynchronize(stream));
      std::string want(plan.output_bytes() * kSamples, '\0');
      NormalizeOnHost(plan, host_table, pixels.data(), kSamples,
                      reinterpret_cast<uint8_t*>(want.data()));
      std::string got(want.size(), '\0');
      ASSERT_CUDA(
          cudaMemcpy(got.data(), dst, got.size(), cudaMemcpyDeviceToHost));
      EXPECT_TRUE(got == want)
          << DeviceDTypeName(dtype) << " " << (chw ? "chw" : "hwc");
    }
  }
  cudaFree(dst);
  cudaFree(table);
  cudaFree(src);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace stoker::transport
