// PixelConverter: the last step of the image path. It reads an RGB uint8
// image and writes it straight into the batch buffer in the requested
// dtype and layout, mirroring columns for a horizontal flip on the way.
//
// Normalization follows torchvision: out = (x / 255 - mean) / std per
// channel. Every possible output value is computed once, in double, into a
// 256-entry table per channel, so results do not depend on the pixel path
// and equal float((x / 255.0 - mean) / std) exactly. On x86-64 CPUs with
// AVX2, float CHW output is computed eight pixels at a time as
// fma(x, 1 / (255 std), -mean / std) in double, where the constructor has
// checked that this gives the table's value for every byte (it does for
// the usual means and stds; where it does not, the tables are used).
// uint8 output passes pixels through unchanged.
//
// Thread-safety: immutable after construction; Convert may run on many
// threads at once.
#ifndef STOKER_SERVER_PIPELINE_PIXEL_CONVERT_H_
#define STOKER_SERVER_PIPELINE_PIXEL_CONVERT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "server/tensor/dtype.h"

namespace stoker::pipeline {

enum class Layout { kHwc, kChw };

// How a pipeline writes its image output.
struct OutputFormat {
  tensor::DType dtype = tensor::DType::kUint8;
  Layout layout = Layout::kHwc;
  std::array<double, 3> mean = {0.0, 0.0, 0.0};
  std::array<double, 3> std = {1.0, 1.0, 1.0};
};

// The tensor shape of a height x width RGB image in `format`'s layout.
std::vector<int64_t> ImageShape(const OutputFormat& format, int height,
                                int width);

class PixelConverter {
 public:
  // InvalidArgument for a dtype other than uint8, float16 or float32, for
  // uint8 with a mean or std other than 0 and 1, or for a std that is not
  // positive and finite.
  static absl::Status Check(const OutputFormat& format);

  // REQUIRES: Check(format) is OK.
  explicit PixelConverter(const OutputFormat& format);

  const OutputFormat& format() const { return format_; }

  // The normalization as x * scale + shift, per channel.
  struct Affine {
    double scale[3] = {1.0, 1.0, 1.0};
    double shift[3] = {0.0, 0.0, 0.0};
  };

  // True when the output is the RGB uint8 input itself (uint8, HWC).
  bool is_passthrough() const;
  // Whether this CPU has what the vector path needs (x86-64 with AVX2, FMA
  // and F16C).
  static bool CpuCanVectorize();
  // True when Convert takes the AVX2 path for this format (float32 or
  // float16 CHW on a CPU with AVX2, FMA and F16C, exactness checked).
  bool vectorized() const {
    return format_.dtype == tensor::DType::kFloat32   ? simd32_
           : format_.dtype == tensor::DType::kFloat16 ? simd16_
                                                      : false;
  }

  // Writes the width x height RGB image at `src` (rows `stride` bytes apart)
  // to `dst`, which holds ImageShape(format, height, width) elements of the
  // format's dtype. With `flip`, column x of the output is column
  // width - 1 - x of the input. REQUIRES: dst is aligned for the dtype.
  void Convert(const uint8_t* src, size_t stride, int width, int height,
               bool flip, uint8_t* dst) const;

 private:
  OutputFormat format_;
  // Output value of each channel for each input byte, for float outputs.
  std::array<std::array<float, 256>, 3> lut32_{};
  std::array<std::array<uint16_t, 256>, 3> lut16_{};
  Affine affine_;
  // Whether float32 / float16 CHW output takes the AVX2 path, which the
  // constructor found to give exactly the tables' values.
  bool simd32_ = false;
  bool simd16_ = false;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_PIXEL_CONVERT_H_
