#include "server/pipeline/pixel_convert.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "server/tensor/float16.h"

namespace stoker::pipeline {
namespace {

// Maps a channel's byte to its output value through per-channel tables.
template <typename T>
struct TableMap {
  const T* table[3];
  T operator()(int c, uint8_t v) const { return table[c][v]; }
};

// Keeps bytes as they are, for uint8 output.
struct CopyMap {
  uint8_t operator()(int, uint8_t v) const { return v; }
};

// Writes one row of `width` RGB pixels starting at `px` and stepping `step`
// bytes (3, or -3 for a flipped row), in CHW (three output planes) or HWC.
// One template per layout and step, so that the inner loop has no branch
// and no multiply: callgrind counted 13 instructions per output value for
// the generic loop this replaced, about 4 for these (docs/performance.md).
template <int kStep, typename T, typename Map>
void RowChw(const uint8_t* px, int width, const Map& map, T* out0, T* out1,
            T* out2) {
  for (int x = 0; x < width; ++x) {
    const uint8_t* p = px + static_cast<ptrdiff_t>(kStep) * x;
    out0[x] = map(0, p[0]);
    out1[x] = map(1, p[1]);
    out2[x] = map(2, p[2]);
  }
}

template <int kStep, typename T, typename Map>
void RowHwc(const uint8_t* px, int width, const Map& map, T* out) {
  for (int x = 0; x < width; ++x) {
    const uint8_t* p = px + static_cast<ptrdiff_t>(kStep) * x;
    out[3 * x] = map(0, p[0]);
    out[3 * x + 1] = map(1, p[1]);
    out[3 * x + 2] = map(2, p[2]);
  }
}

// Writes the image in HWC (pixels consecutive) or CHW (channel c at
// dst + c * plane).
template <bool kChw, typename T, typename Map>
void ConvertImage(const uint8_t* src, size_t stride, int width, int height,
                  bool flip, const Map& map, T* dst) {
  const size_t plane = static_cast<size_t>(width) * height;
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = src + y * stride;
    const uint8_t* first = flip ? row + 3 * static_cast<size_t>(width - 1) : row;
    if (kChw) {
      T* out = dst + static_cast<size_t>(y) * width;
      if (flip) {
        RowChw<-3>(first, width, map, out, out + plane, out + 2 * plane);
      } else {
        RowChw<3>(first, width, map, out, out + plane, out + 2 * plane);
      }
    } else {
      T* out = dst + static_cast<size_t>(y) * width * 3;
      if (flip) {
        RowHwc<-3>(first, width, map, out);
      } else {
        RowHwc<3>(first, width, map, out);
      }
    }
  }
}

template <typename T, typename Map>
void ConvertImage(const uint8_t* src, size_t stride, int width, int height,
                  bool flip, Layout layout, const Map& map, T* dst) {
  if (layout == Layout::kChw) {
    ConvertImage<true>(src, stride, width, height, flip, map, dst);
  } else {
    ConvertImage<false>(src, stride, width, height, flip, map, dst);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STOKER_CONVERT_SIMD 1

// The shuffle that moves channel `c` of eight consecutive RGB pixels (24
// bytes: `lo` 16 bytes, then `hi` 8) into bytes 0..7, pixel 7 first when
// `flip`. A byte 0x80 in the mask writes zero.
struct ChannelShuffle {
  uint8_t lo[16];
  uint8_t hi[16];
};

constexpr ChannelShuffle MakeShuffle(int c, bool flip) {
  ChannelShuffle s{};
  for (int j = 0; j < 16; ++j) {
    s.lo[j] = 0x80;
    s.hi[j] = 0x80;
  }
  for (int j = 0; j < 8; ++j) {
    const int byte = 3 * (flip ? 7 - j : j) + c;
    if (byte < 16) {
      s.lo[j] = static_cast<uint8_t>(byte);
    } else {
      s.hi[j] = static_cast<uint8_t>(byte - 16);
    }
  }
  return s;
}

constexpr ChannelShuffle kShuffles[2][3] = {
    {MakeShuffle(0, false), MakeShuffle(1, false), MakeShuffle(2, false)},
    {MakeShuffle(0, true), MakeShuffle(1, true), MakeShuffle(2, true)},
};

// The CHW row for float outputs, eight pixels at a time, with AVX2: each
// channel's bytes are gathered by two shuffles, and the value computed as
// float(fma(x, scale, shift)) in double. The constructor runs this very
// code over every byte value and keeps it only where it gives the table's
// values exactly (SimdMatches), so the output does not depend on the path.
// It writes the first width - width % 8 columns and returns how many.
template <typename T, bool kFlip>
__attribute__((target("avx2,fma,f16c"))) int SimdRowChw(
    const uint8_t* row, int width, const PixelConverter::Affine& affine, T* out0,
    T* out1, T* out2) {
  T* const outs[3] = {out0, out1, out2};
  __m128i mask_lo[3], mask_hi[3];
  __m256d scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    const ChannelShuffle& s = kShuffles[kFlip][c];
    mask_lo[c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.lo));
    mask_hi[c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.hi));
    scale[c] = _mm256_set1_pd(affine.scale[c]);
    shift[c] = _mm256_set1_pd(affine.shift[c]);
  }
  const int done = width - width % 8;
  for (int x = 0; x < done; x += 8) {
    // Output columns x..x+7 read source pixels x..x+7, or, flipped,
    // width-8-x..width-1-x in reverse.
    const uint8_t* p = row + 3 * static_cast<size_t>(kFlip ? width - 8 - x : x);
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 16));
    for (int c = 0; c < 3; ++c) {
      const __m128i bytes = _mm_or_si128(_mm_shuffle_epi8(lo, mask_lo[c]),
                                         _mm_shuffle_epi8(hi, mask_hi[c]));
      const __m256i ints = _mm256_cvtepu8_epi32(bytes);
      const __m256d d0 = _mm256_fmadd_pd(
          _mm256_cvtepi32_pd(_mm256_castsi256_si128(ints)), scale[c],
          shift[c]);
      const __m256d d1 = _mm256_fmadd_pd(
          _mm256_cvtepi32_pd(_mm256_extracti128_si256(ints, 1)), scale[c],
          shift[c]);
      const __m256 f =
          _mm256_set_m128(_mm256_cvtpd_ps(d1), _mm256_cvtpd_ps(d0));
      if constexpr (sizeof(T) == 4) {
        _mm256_storeu_ps(reinterpret_cast<float*>(outs[c] + x), f);
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(outs[c] + x),
                         _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
  return done;
}

template <typename T>
int SimdRow(const uint8_t* row, int width, bool flip,
            const PixelConverter::Affine& affine, T* out0, T* out1, T* out2) {
  return flip ? SimdRowChw<T, true>(row, width, affine, out0, out1, out2)
              : SimdRowChw<T, false>(row, width, affine, out0, out1, out2);
}

// Whether SimdRow gives exactly `table`'s values for every byte, both ways.
template <typename T>
bool SimdMatches(const PixelConverter::Affine& affine,
                 const std::array<std::array<T, 256>, 3>& table) {
  if (!PixelConverter::CpuCanVectorize()) return false;
  std::vector<uint8_t> row(3 * 256);
  for (int x = 0; x < 256; ++x) row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = x;
  std::vector<T> out(3 * 256);
  for (bool flip : {false, true}) {
    SimdRow<T>(row.data(), 256, flip, affine, out.data(), out.data() + 256,
               out.data() + 512);
    for (int c = 0; c < 3; ++c) {
      for (int x = 0; x < 256; ++x) {
        const int v = flip ? 255 - x : x;
        if (std::memcmp(&out[c * 256 + x], &table[c][v], sizeof(T)) != 0) {
          return false;
        }
      }
    }
  }
  return true;
}

// The CHW image through SimdRow, each row's last width % 8 columns through
// the tables.
template <typename T>
void ConvertChwSimd(const uint8_t* src, size_t stride, int width, int height,
                    bool flip, const PixelConverter::Affine& affine,
                    const TableMap<T>& map, T* dst) {
  const size_t plane = static_cast<size_t>(width) * height;
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = src + y * stride;
    T* out = dst + static_cast<size_t>(y) * width;
    const int done = SimdRow<T>(row, width, flip, affine, out, out + plane,
                                out + 2 * plane);
    if (done == width) continue;
    out += done;
    if (flip) {
      RowChw<-3>(row + 3 * static_cast<size_t>(width - 1 - done), width - done,
                 map, out, out + plane, out + 2 * plane);
    } else {
      RowChw<3>(row + 3 * static_cast<size_t>(done), width - done, map, out,
                out + plane, out + 2 * plane);
    }
  }
}

#endif  // x86-64

// A float output through `table`, or, where `vectorized`, the AVX2 path.
template <typename T>
void ConvertFloat(const uint8_t* src, size_t stride, int width, int height,
                  bool flip, Layout layout,
                  const std::array<std::array<T, 256>, 3>& table,
                  bool vectorized, const PixelConverter::Affine& affine,
                  T* dst) {
  const TableMap<T> map{{table[0].data(), table[1].data(), table[2].data()}};
#ifdef STOKER_CONVERT_SIMD
  if (vectorized) {
    ConvertChwSimd(src, stride, width, height, flip, affine, map, dst);
    return;
  }
#else
  (void)vectorized;
  (void)affine;
#endif
  ConvertImage(src, stride, width, height, flip, layout, map, dst);
}

}  // namespace

bool PixelConverter::CpuCanVectorize() {
#ifdef STOKER_CONVERT_SIMD
  // F16C from CPUID itself: clang's __builtin_cpu_supports does not know it.
  static const bool kCan = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
                      (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
  }();
  return kCan;
#else
  return false;
#endif
}

std::vector<int64_t> ImageShape(const OutputFormat& format, int height,
                                int width) {
  if (format.layout == Layout::kChw) return {3, height, width};
  return {height, width, 3};
}

absl::Status PixelConverter::Check(const OutputFormat& format) {
  if (format.dtype != tensor::DType::kUint8 &&
      format.dtype != tensor::DType::kFloat16 &&
      format.dtype != tensor::DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("image dtype must be uint8, float16 or float32, not ",
                     std::string(tensor::DTypeName(format.dtype))));
  }
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite(format.mean[c])) {
      return absl::InvalidArgumentError(
          absl::StrCat("mean[", c, "] is not finite"));
    }
    if (!std::isfinite(format.std[c]) || format.std[c] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "std[", c, "] must be positive and finite, not ", format.std[c]));
    }
    if (format.dtype == tensor::DType::kUint8 &&
        (format.mean[c] != 0.0 || format.std[c] != 1.0)) {
      return absl::InvalidArgumentError(
          "dtype uint8 passes pixels through and takes no mean or std");
    }
  }
  return absl::OkStatus();
}

PixelConverter::PixelConverter(const OutputFormat& format) : format_(format) {
  for (int c = 0; c < 3; ++c) {
    for (int x = 0; x < 256; ++x) {
      const double v = (x / 255.0 - format.mean[c]) / format.std[c];
      lut32_[c][x] = static_cast<float>(v);
      lut16_[c][x] = tensor::FloatToHalf(static_cast<float>(v));
    }
  }
#ifdef STOKER_CONVERT_SIMD
  for (int c = 0; c < 3; ++c) {
    affine_.scale[c] = 1.0 / (255.0 * format.std[c]);
    affine_.shift[c] = -format.mean[c] / format.std[c];
  }
  simd32_ = format.layout == Layout::kChw && SimdMatches(affine_, lut32_);
  simd16_ = format.layout == Layout::kChw && SimdMatches(affine_, lut16_);
#endif
}

bool PixelConverter::is_passthrough() const {
  return format_.dtype == tensor::DType::kUint8 &&
         format_.layout == Layout::kHwc;
}

void PixelConverter::Convert(const uint8_t* src, size_t stride, int width,
                             int height, bool flip, uint8_t* dst) const {
  if (is_passthrough() && !flip) {
    const size_t row_bytes = 3 * static_cast<size_t>(width);
    for (int y = 0; y < height; ++y) {
      std::memcpy(dst + y * row_bytes, src + y * stride, row_bytes);
    }
    return;
  }
  switch (format_.dtype) {
    case tensor::DType::kFloat32:
      ConvertFloat(src, stride, width, height, flip, format_.layout, lut32_,
                   simd32_, affine_, reinterpret_cast<float*>(dst));
      break;
    case tensor::DType::kFloat16:
      ConvertFloat(src, stride, width, height, flip, format_.layout, lut16_,
                   simd16_, affine_, reinterpret_cast<uint16_t*>(dst));
      break;
    default:
      ConvertImage(src, stride, width, height, flip, format_.layout, CopyMap{},
                   dst);
      break;
  }
}

}  // namespace stoker::pipeline
