// The last step of the image path, done on the GPU for cuda_ipc: a batch
// of uint8 HWC RGB images (what the CPU pipeline renders when its format
// ops are left to the device) becomes the normalized float32, float16 or
// bfloat16 (or uint8) tensor in CHW or HWC, written into a device slot.
// Copying uint8 over PCIe moves a quarter of the bytes of float32.
//
// The arithmetic is the CPU's (pipeline/pixel_convert.h): every output
// value is computed once on the host, in double, as
// (x / 255 - mean[c]) / std[c], rounded to float32, into a table of 256
// entries per channel (NormalizeTable); the kernel and the host reference
// (NormalizeOnHost) only look values up and place them. So float32 and
// float16 equal the CPU normalize + layout ops' output bit for bit, and
// bfloat16 is that float32 value rounded to nearest, ties to even (what
// torch's .to(torch.bfloat16) of the CPU tensor gives).
//
// Thread-safety: plain values and pure functions; NormalizeOnDevice may be
// called from many threads, each with its own CUDA stream.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_NORMALIZE_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_NORMALIZE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*.

namespace stoker::transport {

enum class DeviceDType { kUint8, kFloat16, kBFloat16, kFloat32 };

size_t DeviceDTypeSize(DeviceDType dtype);
// "uint8", "float16", "bfloat16", "float32".
std::string_view DeviceDTypeName(DeviceDType dtype);

// What the device does to each image of a batch.
struct NormalizePlan {
  DeviceDType dtype = DeviceDType::kFloat32;
  bool chw = true;  // Else HWC.
  std::array<double, 3> mean = {0.0, 0.0, 0.0};
  std::array<double, 3> std = {1.0, 1.0, 1.0};
  int height = 0;
  int width = 0;

  // Bytes of one sample's input (height x width x 3 uint8) and output.
  size_t input_bytes() const;
  size_t output_bytes() const;
};

// The bits of each output value, entries[c * 256 + x] for channel c and
// input byte x, in the low bits of a uint32: float32 bits, binary16 or
// bfloat16 bits, or the byte itself. The device copy is these 3 KiB.
class NormalizeTable {
 public:
  static constexpr size_t kEntries = 3 * 256;
  explicit NormalizeTable(const NormalizePlan& plan);
  // The entries as given (read off the CPU's own output: device_outputs.h).
  explicit NormalizeTable(const std::array<uint32_t, kEntries>& entries)
      : entries_(entries) {}
  const std::array<uint32_t, kEntries>& entries() const { return entries_; }

 private:
  std::array<uint32_t, kEntries> entries_{};
};

// bfloat16 bits of `value`: rounded to nearest, ties to even; overflow
// gives infinity, and NaN stays a quiet NaN of the same sign.
uint16_t FloatToBFloat16(float value);

// The host reference: writes `samples` images from `src` (samples x
// input_bytes(), back to back) to `dst` (samples x output_bytes()), as
// the kernel does. REQUIRES: `table` was made from `plan`.
void NormalizeOnHost(const NormalizePlan& plan, const NormalizeTable& table,
                     const uint8_t* src, uint32_t samples, uint8_t* dst);

// The kernel: the same on device memory, queued on `stream`, with
// `device_table` a device copy of table.entries(). Returns the launch's
// error; the work completes later, in stream order. FAILED_PRECONDITION
// when built without CUDA.
absl::Status NormalizeOnDevice(const NormalizePlan& plan,
                               const uint32_t* device_table,
                               const uint8_t* device_src, uint32_t samples,
                               void* device_dst, CUstream_st* stream);

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_NORMALIZE_H_
