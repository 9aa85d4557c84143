// The plain decode path that the fused decoder is pinned against, and
// JPEG variants (subsampling, progressive) the shared fixtures do not make.
// Built on TurboJPEG's whole-image API only. Thread-safe: pure functions.
#ifndef STOKER_TESTS_PIPELINE_REFERENCE_DECODE_H_
#define STOKER_TESTS_PIPELINE_REFERENCE_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace stoker::pipeline::testing {

// MakePixels' RGB picture encoded at quality 90 with TurboJPEG subsampling
// `subsamp` (TJSAMP_444, TJSAMP_422, ...).
std::string EncodeRgb(int width, int height, uint32_t seed, int subsamp);

// `jpeg` re-encoded losslessly as a progressive JPEG.
std::string MakeProgressive(const std::string& jpeg);

// Tightly packed RGB pixels.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
  const uint8_t* at(int y, int x) const {
    return pixels.data() + (static_cast<size_t>(y) * width + x) * 3;
  }
};

// The whole image decoded by tjDecompress2 at scale/8, as RGB. CMYK and
// YCCK images are decoded to CMYK and converted with the Adobe-inverted
// formula R = C * K / 255 (rounded), like the decoder under test.
RgbImage TurboDecode(const std::string& jpeg, int scale = 8);

}  // namespace stoker::pipeline::testing

#endif  // STOKER_TESTS_PIPELINE_REFERENCE_DECODE_H_
