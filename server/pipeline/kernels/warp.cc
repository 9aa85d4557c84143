#include "server/pipeline/kernels/warp.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace stoker::pipeline::kernels {
namespace {

constexpr double kPi = 3.14159265358979323846;

double Radians(double degrees) { return degrees * kPi / 180.0; }

// a * b + c rounded once to float, as torch's vectorized grid_sample
// computes it with fused multiply-adds. kHardware: the CPU's FMA
// instruction (in a function compiled for it, see WarpAffine). Otherwise
// through double: the product of two floats is exact there, so the result
// is the fused one but for a double sum that lands exactly half way
// between two floats.
template <bool kHardware>
inline float Fma(float a, float b, float c) {
  if constexpr (kHardware) {
    return __builtin_fmaf(a, b, c);
  } else {
    return static_cast<float>(static_cast<double>(a) * b + c);
  }
}

// round() then the cast to uint8 of _cast_squeeze_out; values stay in
// [0, 255] for fills in range, the clamp only guards the cast.
inline uint8_t ToUint8(float v) {
  return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f));
}

// The source index of grid value `g` along an axis of `size` pixels
// (grid_sample, align_corners=False): (g + 1) * size / 2 - 0.5.
template <bool kHardware>
inline float SourceIndex(float g, float half_size) {
  return Fma<kHardware>(g + 1.0f, half_size, -0.5f);
}

// Whether `v` (a float index) rounds into [0, size), without casting a
// huge or NaN value to int.
inline bool Inside(float v, int size) {
  return v >= 0.0f && v < static_cast<float>(size);
}

}  // namespace

std::array<double, 6> InverseAffineMatrix(double center_x, double center_y,
                                          double angle, double translate_x,
                                          double translate_y, double scale,
                                          double shear_x, double shear_y) {
  const double rot = Radians(angle);
  const double sx = Radians(shear_x);
  const double sy = Radians(shear_y);
  // RotateScaleShear without scaling, as torchvision writes it.
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b =
      -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d =
      -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v /= scale;
  m[2] += m[0] * (-center_x - translate_x) + m[1] * (-center_y - translate_y);
  m[5] += m[3] * (-center_x - translate_x) + m[4] * (-center_y - translate_y);
  m[2] += center_x;
  m[5] += center_y;
  return m;
}

namespace {

// WarpAffine's body, inlined into each of its two compilations.
template <bool kHardwareFma>
__attribute__((always_inline)) inline void WarpAffineWith(
    const ImageBuffer& image, const std::array<double, 6>& m,
    WarpInterpolation interpolation, const WarpFill& fill) {
  constexpr bool kHw = kHardwareFma;
  const int w = image.width, h = image.height, channels = image.channels;
  if (w <= 0 || h <= 0) return;
  // The source: a packed copy, since every output pixel may read any input.
  const size_t row_bytes = static_cast<size_t>(w) * channels;
  std::vector<uint8_t> src(row_bytes * h);
  for (int y = 0; y < h; ++y) {
    std::memcpy(src.data() + y * row_bytes, image.row(y), row_bytes);
  }
  // _gen_affine_grid: theta in float32, transposed and divided by half the
  // size; the grid point of output (x, y) is (x a0 + y a1) + a2.
  const float half_w = 0.5f * static_cast<float>(w);
  const float half_h = 0.5f * static_cast<float>(h);
  const float a0 = static_cast<float>(m[0]) / half_w;
  const float a1 = static_cast<float>(m[1]) / half_w;
  const float a2 = static_cast<float>(m[2]) / half_w;
  const float b0 = static_cast<float>(m[3]) / half_h;
  const float b1 = static_cast<float>(m[4]) / half_h;
  const float b2 = static_cast<float>(m[5]) / half_h;
  // grid_sample's size / 2, the scaling of its unnormalize.
  const float scale_w = static_cast<float>(w) / 2.0f;
  const float scale_h = static_cast<float>(h) / 2.0f;
  float fill_value[3] = {0, 0, 0};
  if (fill) {
    for (int c = 0; c < channels; ++c) fill_value[c] = (*fill)[c];
  }
  for (int oy = 0; oy < h; ++oy) {
    uint8_t* out = image.row(oy);
    // linspace(-h/2 + 0.5, h/2 - 0.5, h): exact half-integers.
    const float y = static_cast<float>(oy) - half_h + 0.5f;
    const float y_a = y * a1, y_b = y * b1;
    for (int ox = 0; ox < w; ++ox, out += channels) {
      const float x = static_cast<float>(ox) - half_w + 0.5f;
      const float gx = (x * a0 + y_a) + a2;
      const float gy = (x * b0 + y_b) + b2;
      const float ix = SourceIndex<kHw>(gx, scale_w);
      const float iy = SourceIndex<kHw>(gy, scale_h);
      if (interpolation == WarpInterpolation::kNearest) {
        const float rx = std::nearbyint(ix), ry = std::nearbyint(iy);
        if (Inside(rx, w) && Inside(ry, h)) {
          std::memcpy(out,
                      &src[static_cast<size_t>(ry) * row_bytes +
                           static_cast<size_t>(rx) * channels],
                      channels);
        } else {
          for (int c = 0; c < channels; ++c) out[c] = ToUint8(fill_value[c]);
        }
        continue;
      }
      const float fx = std::floor(ix), fy = std::floor(iy);
      const float we = ix - fx, e = 1.0f - we;  // Distances to west, east.
      const float n = iy - fy, s = 1.0f - n;    // To north, south.
      const float weight[4] = {s * e, s * we, n * e, n * we};  // nw ne sw se
      // The four neighbours, or null where outside (they weigh in as 0).
      const uint8_t* corner[4] = {nullptr, nullptr, nullptr, nullptr};
      const bool west = Inside(fx, w), east = Inside(fx + 1.0f, w);
      const bool north = Inside(fy, h), south = Inside(fy + 1.0f, h);
      if (north || south) {
        const size_t x0 = west ? static_cast<size_t>(fx) : 0;
        const size_t x1 = east ? static_cast<size_t>(fx + 1.0f) : 0;
        if (north) {
          const uint8_t* row = &src[static_cast<size_t>(fy) * row_bytes];
          if (west) corner[0] = row + x0 * channels;
          if (east) corner[1] = row + x1 * channels;
        }
        if (south) {
          const uint8_t* row = &src[static_cast<size_t>(fy + 1.0f) * row_bytes];
          if (west) corner[2] = row + x0 * channels;
          if (east) corner[3] = row + x1 * channels;
        }
      }
      // The mask channel: the weight that fell inside.
      float mask = 0.0f;
      for (int k = 0; k < 4; ++k) {
        const float one = corner[k] != nullptr ? 1.0f : 0.0f;
        mask = k == 0 ? one * weight[0] : Fma<kHw>(one, weight[k], mask);
      }
      for (int c = 0; c < channels; ++c) {
        float v = 0.0f;
        for (int k = 0; k < 4; ++k) {
          const float value =
              corner[k] != nullptr ? static_cast<float>(corner[k][c]) : 0.0f;
          v = k == 0 ? value * weight[0] : Fma<kHw>(value, weight[k], v);
        }
        if (fill) v = v * mask + (1.0f - mask) * fill_value[c];
        out[c] = ToUint8(v);
      }
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STOKER_WARP_FMA_DISPATCH 1
// The warp compiled for CPUs with FMA: 1.8x faster (3.9 against 2.2 ms for
// a bilinear 224x224 rotate), as the double round trips go.
__attribute__((target("fma"))) void WarpAffineFma(
    const ImageBuffer& image, const std::array<double, 6>& m,
    WarpInterpolation interpolation, const WarpFill& fill) {
  WarpAffineWith<true>(image, m, interpolation, fill);
}
#endif

}  // namespace

void WarpAffine(const ImageBuffer& image, const std::array<double, 6>& m,
                WarpInterpolation interpolation, const WarpFill& fill) {
#ifdef STOKER_WARP_FMA_DISPATCH
  static const bool kHasFma = __builtin_cpu_supports("fma");
  if (kHasFma) {
    WarpAffineFma(image, m, interpolation, fill);
    return;
  }
#endif
  WarpAffineWith<false>(image, m, interpolation, fill);
}

void Affine(const ImageBuffer& image, double angle, double translate_x,
            double translate_y, double scale, double shear_x, double shear_y,
            WarpInterpolation interpolation, const WarpFill& fill,
            const WarpCenter& center) {
  // F.affine on a tensor: a given centre is moved to be relative to the
  // image centre; none is the centre itself.
  const double cx = center.given ? center.x - image.width * 0.5 : 0.0;
  const double cy = center.given ? center.y - image.height * 0.5 : 0.0;
  WarpAffine(image,
             InverseAffineMatrix(cx, cy, angle, translate_x, translate_y, scale,
                                 shear_x, shear_y),
             interpolation, fill);
}

void Rotate(const ImageBuffer& image, double angle,
            WarpInterpolation interpolation, const WarpFill& fill,
            const WarpCenter& center) {
  // F.rotate turns counter-clockwise, the affine matrix clockwise: -angle.
  Affine(image, -angle, 0, 0, 1.0, 0, 0, interpolation, fill, center);
}

}  // namespace stoker::pipeline::kernels
