#include "tests/testing/images.h"

#include <turbojpeg.h>

#include <cmath>
#include <stdexcept>

namespace stoker::testing {
uint32_t TestHash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352d;
  x ^= x >> 15;
  x *= 0x846ca68b;
  x ^= x >> 16;
  return x;
}

std::vector<uint8_t> MakePixels(int width, int height, uint32_t seed,
                                ColorKind kind) {
  const int channels =
      kind == ColorKind::kGray ? 1 : (kind == ColorKind::kCmyk ? 4 : 3);
  std::vector<uint8_t> px(static_cast<size_t>(width) * height * channels);
  const double cx = width * (0.3 + (TestHash(seed) % 40) / 100.0);
  const double cy = height * (0.3 + (TestHash(seed + 1) % 40) / 100.0);
  const double radius = std::min(width, height) * 0.25;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const bool in_disc = std::hypot(x - cx, y - cy) < radius;
      const uint32_t noise = TestHash(seed * 7919u + y * 65537u + x) % 16;
      for (int c = 0; c < channels; ++c) {
        double v = 255.0 * (c % 2 == 0 ? x / double(width) : y / double(height));
        v = 0.6 * v + 40.0 * c + (in_disc ? 80.0 : 0.0) + noise;
        px[(static_cast<size_t>(y) * width + x) * channels + c] =
            static_cast<uint8_t>(std::fmod(v, 256.0));
      }
    }
  }
  return px;
}

std::string MakeJpeg(int width, int height, uint32_t seed, int quality,
                     ColorKind kind) {
  const std::vector<uint8_t> px = MakePixels(width, height, seed, kind);
  const int format = kind == ColorKind::kGray   ? TJPF_GRAY
                     : kind == ColorKind::kCmyk ? TJPF_CMYK
                                                : TJPF_RGB;
  const int subsamp = kind == ColorKind::kGray ? TJSAMP_GRAY : TJSAMP_420;
  tjhandle handle = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(handle, px.data(), width, 0, height, format, &out,
                             &size, subsamp, quality, 0);
  std::string result;
  if (rc == 0) result.assign(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(handle);
  if (rc != 0) throw std::runtime_error("tjCompress2 failed");
  return result;
}

std::string MakePngLookalike() {
  return std::string("\x89PNG\r\n\x1a\n", 8) + std::string(200, '\x42');
}

}  // namespace stoker::testing
