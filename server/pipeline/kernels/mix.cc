#include "server/pipeline/kernels/mix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "server/tensor/float16.h"

namespace stoker::pipeline::kernels {
namespace {

// x[i] = x[i] * a + x[i - 1] * b over `n` samples of `count` elements at
// `base`, sample 0 with sample n - 1, each product rounded to float.
// Load(p, k) reads element k of sample p as float; Store writes it.
template <typename T, typename Load, typename Store>
void MixRolled(T* base, size_t count, uint32_t n, float a, float b, Load load,
               Store store) {
  if (n == 0) return;
  const std::vector<T> last(base + (n - 1) * count, base + n * count);
  for (uint32_t i = n; i-- > 0;) {
    T* x = base + i * count;
    const T* partner = i > 0 ? base + (i - 1) * count : last.data();
    for (size_t k = 0; k < count; ++k) {
      const float own = load(x, k) * a;
      const float other = load(partner, k) * b;
      store(x, k, own + other);
    }
  }
}

void MixFloats(float* base, size_t count, uint32_t n, double lambda) {
  MixRolled(
      base, count, n, static_cast<float>(lambda),
      static_cast<float>(1.0 - lambda),
      [](const float* p, size_t k) { return p[k]; },
      [](float* p, size_t k, float v) { p[k] = v; });
}

// Calls fn(offset, bytes) for each run of contiguous bytes of `box` within
// one sample of `image`'s shape.
template <typename Fn>
void ForEachBoxRun(const TensorRef& image, const CutBox& box, Fn fn) {
  const size_t element = tensor::DTypeSize(image.dtype);
  const size_t w = static_cast<size_t>(image.width);
  const size_t box_w = static_cast<size_t>(box.x2 - box.x1);
  if (box_w == 0 || box.y2 <= box.y1) return;
  if (image.layout == Layout::kChw) {
    for (int c = 0; c < image.channels; ++c) {
      for (int y = box.y1; y < box.y2; ++y) {
        const size_t row = static_cast<size_t>(c) * image.height + y;
        fn((row * w + box.x1) * element, box_w * element);
      }
    }
  } else {
    const size_t pixel = element * image.channels;
    for (int y = box.y1; y < box.y2; ++y) {
      fn((static_cast<size_t>(y) * w + box.x1) * pixel, box_w * pixel);
    }
  }
}

}  // namespace

CutBox DrawCutBox(int height, int width, double lambda, SampleRng& rng) {
  // torch.randint(W, (1,)) then torch.randint(H, (1,)).
  const int r_x = static_cast<int>(rng.UniformInt(0, width - 1));
  const int r_y = static_cast<int>(rng.UniformInt(0, height - 1));
  const double r = 0.5 * std::sqrt(1.0 - lambda);
  const int r_w_half = static_cast<int>(r * width);
  const int r_h_half = static_cast<int>(r * height);
  CutBox box;
  box.x1 = std::max(r_x - r_w_half, 0);
  box.y1 = std::max(r_y - r_h_half, 0);
  box.x2 = std::min(r_x + r_w_half, width);
  box.y2 = std::min(r_y + r_h_half, height);
  box.lambda = 1.0 - static_cast<double>(box.x2 - box.x1) *
                         (box.y2 - box.y1) /
                         (static_cast<double>(width) * height);
  return box;
}

void MixUpImages(const BatchImages& batch, double lambda) {
  const TensorRef& image = batch.image;
  const size_t count =
      static_cast<size_t>(image.height) * image.width * image.channels;
  if (image.dtype == tensor::DType::kFloat32) {
    MixFloats(reinterpret_cast<float*>(image.data), count, batch.size, lambda);
    return;
  }
  MixRolled(
      reinterpret_cast<uint16_t*>(image.data), count, batch.size,
      static_cast<float>(lambda), static_cast<float>(1.0 - lambda),
      [](const uint16_t* p, size_t k) { return tensor::HalfToFloat(p[k]); },
      [](uint16_t* p, size_t k, float v) { p[k] = tensor::FloatToHalf(v); });
}

void PasteBox(const BatchImages& batch, const CutBox& box) {
  if (batch.size == 0) return;
  // The last sample's box, for the first sample.
  std::vector<uint8_t> saved;
  ForEachBoxRun(batch.image, box, [&](size_t offset, size_t bytes) {
    const uint8_t* src = batch.Sample(batch.size - 1) + offset;
    saved.insert(saved.end(), src, src + bytes);
  });
  for (uint32_t i = batch.size; i-- > 1;) {
    uint8_t* dst = batch.Sample(i);
    const uint8_t* src = batch.Sample(i - 1);
    ForEachBoxRun(batch.image, box, [&](size_t offset, size_t bytes) {
      std::memcpy(dst + offset, src + offset, bytes);
    });
  }
  size_t at = 0;
  ForEachBoxRun(batch.image, box, [&](size_t offset, size_t bytes) {
    std::memcpy(batch.Sample(0) + offset, saved.data() + at, bytes);
    at += bytes;
  });
}

void MixSoftLabels(const BatchImages& batch, double lambda) {
  MixFloats(batch.soft, static_cast<size_t>(batch.num_classes), batch.size,
            lambda);
}

}  // namespace stoker::pipeline::kernels
