#include "server/pipeline/kernels/color.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace stoker::pipeline::kernels {
namespace {

using Table = std::array<uint8_t, 256>;

// torchvision's _blend of one value: ratio * a + (1 - ratio) * b, each
// product and the sum rounded to float32 as torch computes them, clamped to
// [0, 255], then truncated by the cast to uint8. `rest` is 1 - ratio,
// computed in double (Python) and rounded to float32.
struct Blender {
  explicit Blender(double ratio)
      : ratio(static_cast<float>(ratio)),
        rest(static_cast<float>(1.0 - ratio)) {}
  uint8_t operator()(float a, float b) const {
    const float mixed = ratio * a + rest * b;
    return static_cast<uint8_t>(std::clamp(mixed, 0.0f, 255.0f));
  }
  const float ratio, rest;
};

// rgb_to_grayscale's luma, truncated: (0.2989 R + 0.587 G) + 0.114 B in
// float32.
inline uint8_t Luma(const uint8_t* px) {
  static const float kR = static_cast<float>(0.2989);
  static const float kG = static_cast<float>(0.587);
  static const float kB = static_cast<float>(0.114);
  return static_cast<uint8_t>(kR * px[0] + kG * px[1] + kB * px[2]);
}

// Calls fn(px) on each pixel, px pointing at its 3 channel values.
template <typename Fn>
void ForEachPixel(const ImageBuffer& image, Fn fn) {
  for (int y = 0; y < image.height; ++y) {
    uint8_t* px = image.row(y);
    for (int x = 0; x < image.width; ++x, px += 3) fn(px);
  }
}

void ApplyTable(const ImageBuffer& image, const Table& table) {
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.row(y);
    for (int i = 0; i < image.width * 3; ++i) row[i] = table[row[i]];
  }
}

void ApplyTables(const ImageBuffer& image, const std::array<Table, 3>& t) {
  ForEachPixel(image, [&](uint8_t* px) {
    px[0] = t[0][px[0]];
    px[1] = t[1][px[1]];
    px[2] = t[2][px[2]];
  });
}

// The table of v -> blend(v, other).
Table BlendTable(double ratio, float other) {
  const Blender blend(ratio);
  Table table;
  for (int v = 0; v < 256; ++v) table[v] = blend(static_cast<float>(v), other);
  return table;
}

// _rgb2hsv, a hue shift and _hsv2rgb of one pixel, in float32 as torch
// computes them; writes the result back truncated, as adjust_hue does.
void ShiftHue(uint8_t* px, float hue) {
  const float r = px[0] / 255.0f, g = px[1] / 255.0f, b = px[2] / 255.0f;
  const float maxc = std::max(r, std::max(g, b));
  const float minc = std::min(r, std::min(g, b));
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  const float s = cr / (eqc ? 1.0f : maxc);
  const float divisor = eqc ? 1.0f : cr;
  const float rc = (maxc - r) / divisor;
  const float gc = (maxc - g) / divisor;
  const float bc = (maxc - b) / divisor;
  // Exactly one of torchvision's three masked terms is selected; the others
  // are zeros, which do not change the sum.
  float h;
  if (maxc == r) {
    h = bc - gc;
  } else if (maxc == g) {
    h = 2.0f + rc - bc;
  } else {
    h = 4.0f + gc - rc;
  }
  h = std::fmod(h / 6.0f + 1.0f, 1.0f);
  // (h + hue) % 1.0: torch.remainder takes the sign of the divisor.
  h = std::fmod(h + hue, 1.0f);
  if (h < 0.0f) h += 1.0f;

  const float v = maxc;
  const float i = std::floor(h * 6.0f);
  const float f = h * 6.0f - i;
  const float p = std::clamp(v * (1.0f - s), 0.0f, 1.0f);
  const float q = std::clamp(v * (1.0f - s * f), 0.0f, 1.0f);
  const float t = std::clamp(v * (1.0f - s * (1.0f - f)), 0.0f, 1.0f);
  float out[3];
  switch (static_cast<int>(i) % 6) {
    case 0:
      out[0] = v, out[1] = t, out[2] = p;
      break;
    case 1:
      out[0] = q, out[1] = v, out[2] = p;
      break;
    case 2:
      out[0] = p, out[1] = v, out[2] = t;
      break;
    case 3:
      out[0] = p, out[1] = q, out[2] = v;
      break;
    case 4:
      out[0] = t, out[1] = p, out[2] = v;
      break;
    default:
      out[0] = v, out[1] = p, out[2] = q;
      break;
  }
  for (int c = 0; c < 3; ++c) px[c] = static_cast<uint8_t>(out[c] * 255.0f);
}

}  // namespace

void AdjustBrightness(const ImageBuffer& image, double factor) {
  ApplyTable(image, BlendTable(factor, 0.0f));
}

void AdjustContrast(const ImageBuffer& image, double factor) {
  uint64_t sum = 0;
  ForEachPixel(image, [&](uint8_t* px) { sum += Luma(px); });
  // torch.mean of the float32 grayscale: the sum (exact in float32 up to
  // 2^24) divided by the count.
  const float count = static_cast<float>(int64_t{image.width} * image.height);
  const float mean = count > 0 ? static_cast<float>(sum) / count : 0.0f;
  ApplyTable(image, BlendTable(factor, mean));
}

void AdjustSaturation(const ImageBuffer& image, double factor) {
  const Blender blend(factor);
  ForEachPixel(image, [&](uint8_t* px) {
    const float gray = Luma(px);
    for (int c = 0; c < 3; ++c) px[c] = blend(px[c], gray);
  });
}

void AdjustHue(const ImageBuffer& image, double hue_factor) {
  const float hue = static_cast<float>(hue_factor);
  ForEachPixel(image, [&](uint8_t* px) { ShiftHue(px, hue); });
}

void Grayscale(const ImageBuffer& image) {
  ForEachPixel(image, [](uint8_t* px) { px[0] = px[1] = px[2] = Luma(px); });
}

void Solarize(const ImageBuffer& image, double threshold) {
  // uint8 >= a Python float compares in float32.
  const float at = static_cast<float>(threshold);
  Table table;
  for (int v = 0; v < 256; ++v) {
    table[v] = static_cast<float>(v) >= at ? 255 - v : v;
  }
  ApplyTable(image, table);
}

void Invert(const ImageBuffer& image) {
  Table table;
  for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(255 - v);
  ApplyTable(image, table);
}

void Posterize(const ImageBuffer& image, int bits) {
  const int mask = (0xFF << (8 - bits)) & 0xFF;
  Table table;
  for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(v & mask);
  ApplyTable(image, table);
}

void Equalize(const ImageBuffer& image) {
  std::array<std::array<int64_t, 256>, 3> hist{};
  ForEachPixel(image, [&](uint8_t* px) {
    ++hist[0][px[0]];
    ++hist[1][px[1]];
    ++hist[2][px[2]];
  });
  std::array<Table, 3> tables;
  for (int c = 0; c < 3; ++c) {
    Table& table = tables[c];
    for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(v);
    // _scale_channel: step is the count of every value but the largest
    // present, floor-divided by 255; with step 0 the channel is kept.
    int64_t total = 0;
    int last = 0;
    for (int v = 0; v < 256; ++v) {
      total += hist[c][v];
      if (hist[c][v] != 0) last = v;
    }
    const int64_t step = (total - hist[c][last]) / 255;
    if (step == 0) continue;
    // lut[v] = (cumsum[v - 1] + step // 2) // step, lut[0] = 0, clamped.
    int64_t cumsum = 0;
    table[0] = 0;
    for (int v = 1; v < 256; ++v) {
      cumsum += hist[c][v - 1];
      table[v] = static_cast<uint8_t>(
          std::min<int64_t>(255, (cumsum + step / 2) / step));
    }
  }
  ApplyTables(image, tables);
}

void AutoContrast(const ImageBuffer& image) {
  std::array<uint8_t, 3> lo = {255, 255, 255}, hi = {0, 0, 0};
  ForEachPixel(image, [&](uint8_t* px) {
    for (int c = 0; c < 3; ++c) {
      lo[c] = std::min(lo[c], px[c]);
      hi[c] = std::max(hi[c], px[c]);
    }
  });
  std::array<Table, 3> tables;
  for (int c = 0; c < 3; ++c) {
    // scale = 255 / (max - min) in float32, which torch computes as a
    // reciprocal times 255 (Tensor.__rtruediv__); a constant channel (an
    // infinite scale) takes minimum 0 and scale 1, which keeps it.
    float minimum = lo[c];
    float scale = 1.0f;
    if (hi[c] > lo[c]) {
      scale = (1.0f / (static_cast<float>(hi[c]) - minimum)) * 255.0f;
    } else {
      minimum = 0.0f;
    }
    for (int v = 0; v < 256; ++v) {
      const float stretched = (static_cast<float>(v) - minimum) * scale;
      tables[c][v] = static_cast<uint8_t>(std::clamp(stretched, 0.0f, 255.0f));
    }
  }
  ApplyTables(image, tables);
}

void AdjustSharpness(const ImageBuffer& image, double factor) {
  const int width = image.width, height = image.height;
  if (width <= 2 || height <= 2) return;
  const Blender blend(factor);
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  // The original rows y - 1 and y, as row y is overwritten.
  std::vector<uint8_t> above(image.row(0), image.row(0) + row_bytes);
  std::vector<uint8_t> current(row_bytes);
  for (int y = 0; y < height; ++y) {
    uint8_t* out = image.row(y);
    std::memcpy(current.data(), out, row_bytes);
    const bool border_row = y == 0 || y == height - 1;
    for (size_t i = 0; i < row_bytes; ++i) {
      const size_t x = i / 3;
      int smoothed = current[i];
      if (!border_row && x > 0 && x + 1 < static_cast<size_t>(width)) {
        const uint8_t* below = image.row(y + 1);
        // The 3x3 kernel's weighted sum n over 13, rounded: torch's float
        // convolution, then torch.round. n / 13 is never within 1/26 of a
        // half, far beyond float32's error, so integer rounding agrees.
        const int n = above[i - 3] + above[i] + above[i + 3] + current[i - 3] +
                      5 * current[i] + current[i + 3] + below[i - 3] +
                      below[i] + below[i + 3];
        smoothed = (2 * n + 13) / 26;
      }
      // The border is blended with itself, as torchvision blends the whole
      // image (which is not always the identity in float32).
      out[i] = blend(current[i], static_cast<float>(smoothed));
    }
    above.swap(current);
  }
}

}  // namespace stoker::pipeline::kernels
