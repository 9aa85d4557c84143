// Test images: JPEGs encoded on the fly with libjpeg-turbo, so tests need no
// files in the tree. Thread-safe: every function is pure.
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

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_IMAGES_H_
