#include "server/transport/cuda_ipc/device_normalize.h"

#include <cstring>

#ifndef STOKER_CUDA_BUILT
#error "STOKER_CUDA_BUILT must be 0 or 1 (set by cuda_ipc/CMakeLists.txt)"
#endif

#include "server/cuda/cuda_probe.h"
#include "server/tensor/float16.h"
#include "server/transport/cuda_ipc/normalize_pixel.h"

namespace stoker::transport {
namespace {

template <typename T>
void NormalizeAll(const NormalizePlan& plan, const uint32_t* table,
                  const uint8_t* src, uint32_t samples, uint8_t* dst) {
  const size_t plane = static_cast<size_t>(plan.height) * plan.width;
  const size_t pixels = plane * samples;
  T* out = reinterpret_cast<T*>(dst);
  for (size_t p = 0; p < pixels; ++p) {
    NormalizePixel<T>(table, src, p, plane, plan.chw, out);
  }
}

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

}  // namespace

size_t DeviceDTypeSize(DeviceDType dtype) {
  switch (dtype) {
    case DeviceDType::kUint8:
      return 1;
    case DeviceDType::kFloat16:
    case DeviceDType::kBFloat16:
      return 2;
    case DeviceDType::kFloat32:
      return 4;
  }
  return 0;
}

std::string_view DeviceDTypeName(DeviceDType dtype) {
  switch (dtype) {
    case DeviceDType::kUint8:
      return "uint8";
    case DeviceDType::kFloat16:
      return "float16";
    case DeviceDType::kBFloat16:
      return "bfloat16";
    case DeviceDType::kFloat32:
      return "float32";
  }
  return "unknown";
}

size_t NormalizePlan::input_bytes() const {
  return static_cast<size_t>(height) * width * 3;
}

size_t NormalizePlan::output_bytes() const {
  return input_bytes() * DeviceDTypeSize(dtype);
}

uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding 0x7fff, plus the lowest kept bit, rounds to nearest even; a
  // carry into the exponent is the right result, up to infinity.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

NormalizeTable::NormalizeTable(const NormalizePlan& plan) {
  for (int c = 0; c < 3; ++c) {
    for (int x = 0; x < 256; ++x) {
      uint32_t& entry = entries_[c * 256 + x];
      if (plan.dtype == DeviceDType::kUint8) {
        entry = static_cast<uint32_t>(x);
        continue;
      }
      // As PixelConverter computes it: in double, then rounded to float.
      const float v =
          static_cast<float>((x / 255.0 - plan.mean[c]) / plan.std[c]);
      switch (plan.dtype) {
        case DeviceDType::kFloat16:
          entry = tensor::FloatToHalf(v);
          break;
        case DeviceDType::kBFloat16:
          entry = FloatToBFloat16(v);
          break;
        default:
          entry = FloatBits(v);
          break;
      }
    }
  }
}

void NormalizeOnHost(const NormalizePlan& plan, const NormalizeTable& table,
                     const uint8_t* src, uint32_t samples, uint8_t* dst) {
  const uint32_t* entries = table.entries().data();
  switch (DeviceDTypeSize(plan.dtype)) {
    case 1:
      NormalizeAll<uint8_t>(plan, entries, src, samples, dst);
      break;
    case 2:
      NormalizeAll<uint16_t>(plan, entries, src, samples, dst);
      break;
    default:
      NormalizeAll<uint32_t>(plan, entries, src, samples, dst);
      break;
  }
}

}  // namespace stoker::transport

#if !STOKER_CUDA_BUILT
namespace stoker::transport {

absl::Status NormalizeOnDevice(const NormalizePlan& plan,
                               const uint32_t* device_table,
                               const uint8_t* device_src, uint32_t samples,
                               void* device_dst, CUstream_st* stream) {
  return absl::FailedPreconditionError(cuda::kNotBuiltReason);
}

}  // namespace stoker::transport
#endif
