#include "tests/testing/images.h"

#include <png.h>
#include <turbojpeg.h>

#include <cmath>
#include <csetjmp>
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
        double v =
            255.0 * (c % 2 == 0 ? x / double(width) : y / double(height));
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

namespace {

void AppendToString(png_structp png, png_bytep data, size_t size) {
  static_cast<std::string*>(png_get_io_ptr(png))
      ->append(reinterpret_cast<const char*>(data), size);
}

void FlushNothing(png_structp) {}

// Runs libpng's writer; false on a libpng error. No C++ objects with
// destructors live in this frame, so libpng's longjmp skips no cleanup.
bool WritePng(png_structp png, png_infop info, int width, int height, int color,
              int depth, bool interlaced, png_colorp palette, int palette_size,
              png_bytep trns, int trns_size, png_bytepp rows,
              std::string* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, out, AppendToString, FlushNothing);
  png_set_IHDR(png, info, width, height, depth, color,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (palette_size > 0) {
    png_set_PLTE(png, info, palette, palette_size);
    png_set_tRNS(png, info, trns, trns_size, nullptr);
  }
  png_write_info(png, info);
  png_write_image(png, rows);  // Handles the Adam7 passes itself.
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

TestPng MakePng(int width, int height, PngColor color, int bit_depth,
                bool interlaced, uint32_t seed) {
  const int type = static_cast<int>(color);
  const int samples = color == PngColor::kRgb         ? 3
                      : color == PngColor::kRgba      ? 4
                      : color == PngColor::kGrayAlpha ? 2
                                                      : 1;
  const int max = (1 << bit_depth) - 1;
  const int palette_size = color == PngColor::kPalette ? max + 1 : 0;
  std::vector<png_color> palette(palette_size);
  std::vector<png_byte> trns(palette_size);
  for (int i = 0; i < palette_size; ++i) {
    const uint32_t h = TestHash(seed * 31u + 977u * i);
    palette[i] = {static_cast<png_byte>(h), static_cast<png_byte>(h >> 8),
                  static_cast<png_byte>(h >> 16)};
    trns[i] = static_cast<png_byte>(i % 3 == 0 ? 0 : h >> 24);
  }
  TestPng result;
  result.rgb.resize(static_cast<size_t>(width) * height * 3);
  const size_t row_bytes =
      (static_cast<size_t>(width) * samples * bit_depth + 7) / 8;
  std::vector<std::vector<png_byte>> rows(height,
                                          std::vector<png_byte>(row_bytes));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* rgb = &result.rgb[(static_cast<size_t>(y) * width + x) * 3];
      for (int c = 0; c < samples; ++c) {
        const uint32_t v =
            TestHash(seed * 7919u + (y * width + x) * 5u + c) & max;
        const size_t i = static_cast<size_t>(x) * samples + c;
        if (bit_depth == 16) {
          rows[y][2 * i] = static_cast<png_byte>(v >> 8);
          rows[y][2 * i + 1] = static_cast<png_byte>(v);
        } else {
          // Sub-byte samples are packed from the most significant bit.
          const size_t bit = i * bit_depth;
          rows[y][bit / 8] |=
              static_cast<png_byte>(v << (8 - bit_depth - bit % 8));
        }
        const uint8_t value8 = bit_depth == 16 ? v >> 8 : v * 255 / max;
        if (color == PngColor::kPalette) {
          rgb[0] = palette[v].red;
          rgb[1] = palette[v].green;
          rgb[2] = palette[v].blue;
        } else if (samples <= 2 && c == 0) {
          rgb[0] = rgb[1] = rgb[2] = value8;
        } else if (samples >= 3 && c < 3) {
          rgb[c] = value8;
        }
      }
    }
  }
  std::vector<png_bytep> row_pointers(height);
  for (int y = 0; y < height; ++y) row_pointers[y] = rows[y].data();
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  const bool ok =
      WritePng(png, info, width, height, type, bit_depth, interlaced,
               palette.data(), palette_size, trns.data(), palette_size,
               row_pointers.data(), &result.bytes);
  png_destroy_write_struct(&png, &info);
  if (!ok) throw std::runtime_error("libpng refused to write the test PNG");
  return result;
}

std::string EncodeRgbPng(int width, int height,
                         const std::vector<uint8_t>& rgb) {
  if (rgb.size() != static_cast<size_t>(width) * height * 3) {
    throw std::runtime_error("EncodeRgbPng: rgb is not width * height * 3");
  }
  std::vector<png_bytep> row_pointers(height);
  for (int y = 0; y < height; ++y) {
    row_pointers[y] =
        const_cast<png_bytep>(rgb.data() + static_cast<size_t>(y) * width * 3);
  }
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::string bytes;
  const bool ok =
      WritePng(png, info, width, height, PNG_COLOR_TYPE_RGB, 8, false, nullptr,
               0, nullptr, 0, row_pointers.data(), &bytes);
  png_destroy_write_struct(&png, &info);
  if (!ok) throw std::runtime_error("libpng refused to write the test PNG");
  return bytes;
}

}  // namespace stoker::testing
