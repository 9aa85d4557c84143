// Test images: JPEGs and PNGs encoded on the fly with libjpeg-turbo and
// libpng, so tests need no files in the tree. Thread-safe: every function is
// pure.
#ifndef STOKER_TESTS_TESTING_IMAGES_H_
#define STOKER_TESTS_TESTING_IMAGES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace stoker::testing {

enum class ColorKind { kRgb, kGray, kCmyk };

// A 32-bit integer hash (lowbias32), for test data drawn from a seed.
uint32_t TestHash(uint32_t x);

// Pixels of a deterministic test picture (smooth gradients, a few shapes and
// mild noise, so that it compresses like a photo). RGB: h*w*3 bytes; gray:
// h*w; CMYK: h*w*4.
std::vector<uint8_t> MakePixels(int width, int height, uint32_t seed,
                                ColorKind kind = ColorKind::kRgb);

// The picture of MakePixels encoded as a baseline JPEG.
std::string MakeJpeg(int width, int height, uint32_t seed, int quality = 90,
                     ColorKind kind = ColorKind::kRgb);

// A valid PNG signature followed by junk: a "PNG named .jpg".
std::string MakePngLookalike();

// PNG colour types (the PNG_COLOR_TYPE_* values).
enum class PngColor {
  kGray = 0,
  kRgb = 2,
  kPalette = 3,
  kGrayAlpha = 4,
  kRgba = 6
};

struct TestPng {
  std::string bytes;         // The encoded PNG.
  std::vector<uint8_t> rgb;  // width*height*3: what PIL's convert("RGB")
                             // gives, derived here from the samples.
};

// A width x height PNG of noise drawn from `seed`, of `color` at
// `bit_depth` (1, 2, 4, 8 or 16, as the type allows), Adam7-interlaced if
// `interlaced`. A palette image has a tRNS chunk (transparent entries).
// The expected RGB follows the rules: palette expanded, gray replicated,
// alpha dropped, 16 bits to their high byte, lower gray depths scaled to
// 0-255. Throws std::runtime_error when libpng refuses.
TestPng MakePng(int width, int height, PngColor color, int bit_depth,
                bool interlaced, uint32_t seed);

// `rgb` (width*height*3 bytes, rows packed) as an 8-bit RGB PNG, lossless.
// Throws std::runtime_error when libpng refuses.
std::string EncodeRgbPng(int width, int height,
                         const std::vector<uint8_t>& rgb);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_IMAGES_H_
