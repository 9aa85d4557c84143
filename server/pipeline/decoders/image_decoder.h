// ImageDecoder: what the render path needs from a decoder of one encoded
// image format, and the sniffing that picks the format by content.
//
// A decoder reads a header, tells the image size and the scales it can
// decode at, and decodes a window of the image scaled by scale/8 as RGB
// (image_plan.h plans the window). JPEG (jpeg_decoder.h) decodes only the
// blocks under the window at a DCT scale; PNG (png_decoder.h) decodes at
// scale 8 only. The format comes from the bytes, never from a file name: an
// ImageNet training file named .JPEG is a PNG.
//
// Thread-safety: a decoder is not thread-safe; one per image. Different
// decoders may run on different threads at once. SniffImageFormat is a pure
// function.
#ifndef STOKER_SERVER_PIPELINE_DECODERS_IMAGE_DECODER_H_
#define STOKER_SERVER_PIPELINE_DECODERS_IMAGE_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace stoker::pipeline {

// The most pixels (width x height) an image may have and still be decoded:
// the ceiling of `limits.max_decode_pixels`, and its default. The header
// alone gives the size, so a bigger image is refused before the decoder
// allocates anything for its pixels. What one decode may hold at most is
// set out in docs/architecture.md ("Decode memory").
inline constexpr int64_t kMaxDecodePixelsCeiling = int64_t{1} << 28;
inline constexpr int64_t kDefaultMaxDecodePixels = 64'000'000;

// A window of a scaled image, in pixels: columns [x0, x1), rows [y0, y1).
struct PixelWindow {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int width() const { return x1 - x0; }
  int height() const { return y1 - y0; }
};

// Decoded pixels of a window, `channels` bytes per pixel (3: RGB). A decoder
// may decode a few columns to the left of the window (JPEG crops start on
// an iMCU boundary); data() skips them.
struct DecodedWindow {
  // Left uninitialized on allocation: the decoder writes every byte, and
  // zero-filling it cost 2-3% of a train sample's instructions (measured,
  // docs/performance.md).
  std::unique_ptr<uint8_t[]> buffer;
  size_t buffer_size = 0;
  size_t first_byte = 0;  // Offset of the window's top-left pixel in buffer.
  size_t stride = 0;      // Bytes from one row to the next.
  int width = 0, height = 0;
  int channels = 3;
  const uint8_t* data() const { return buffer.get() + first_byte; }
  uint8_t* mutable_data() { return buffer.get() + first_byte; }
  // Describes an RGB decode of `window` into `rows` rows of `stride` bytes,
  // the window's top-left pixel at `first_byte`, and grows the buffer to
  // hold them (it is kept from one image to the next).
  void PrepareRgb(const PixelWindow& window, size_t stride, size_t rows,
                  size_t first_byte = 0);
};

// The scale numerators M (decode at M/8) a decoder offers, from 1 to 8.
class ScaleSet {
 public:
  // JPEG's DCT scales worth using: 1/8, 2/8, 4/8 and 8/8 (image_plan.cc
  // says why not the others).
  static constexpr ScaleSet Dct() { return ScaleSet({1, 2, 4, 8}); }
  // Full size only: decoders without scaled decoding.
  static constexpr ScaleSet Only8() { return ScaleSet({8}); }
  // Every M/8: what libjpeg-turbo decodes, planned or not.
  static constexpr ScaleSet All() { return ScaleSet({1, 2, 3, 4, 5, 6, 7, 8}); }

  constexpr bool has(int m) const {
    return m >= 1 && m <= 8 && (bits_ & (1u << m)) != 0;
  }

 private:
  constexpr ScaleSet(std::initializer_list<int> scales) {
    for (int m : scales) bits_ |= 1u << m;
  }
  unsigned bits_ = 0;
};

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kTiff };

// OK when `scales` has `scale` and `window` is a non-empty window of the
// `width` x `height` image at that scale; else the InternalError of a
// planner's bug, naming `format` ("PNG"), the window, scale and size.
absl::Status CheckDecodeWindow(std::string_view format, ScaleSet scales,
                               int scale, const PixelWindow& window, int width,
                               int height);

// The format whose magic bytes `bytes` starts with: JPEG FF D8 FF; PNG
// 89 'PNG' 0D 0A 1A 0A; WebP 'RIFF', four size bytes, 'WEBP'; TIFF 'II*' 00
// or 'MM' 00 '*' (and BigTIFF's 2B for *). Nothing else is looked at.
ImageFormat SniffImageFormat(std::string_view bytes);

// "JPEG", "PNG", "WebP", "TIFF", "unknown".
std::string_view ImageFormatName(ImageFormat format);

// The DataLoss for bytes of no supported format: "not JPEG, PNG, WebP or
// TIFF (starts 47 49 46 38)", the first (up to) four bytes in hex, "(no
// bytes)" if none.
absl::Status UnknownFormatError(std::string_view bytes);

class ImageDecoder {
 public:
  virtual ~ImageDecoder() = default;

  // Reads the header of `bytes`, which must stay alive and unchanged until
  // the decoder is destroyed. DataLoss when it is not a decodable image of
  // the decoder's format, or has more pixels than the decoder's limit
  // ("image 9000x9000 (81000000 pixels) is over limits.max_decode_pixels
  // (64000000)"). REQUIRES: called once, first.
  virtual absl::Status ReadHeader(std::string_view bytes) = 0;

  // The image size in pixels. REQUIRES: ReadHeader succeeded.
  virtual int width() const = 0;
  virtual int height() const = 0;

  // The scales DecodeWindow accepts; 8 always.
  virtual ScaleSet scales() const { return ScaleSet::Only8(); }

  // Decodes `window` of the image scaled by scale/8 into `out` as RGB. The
  // scaled image is ScaledImageSize(width(), scale) by
  // ScaledImageSize(height(), scale); the window must lie within it, else
  // Internal. DataLoss when the data under the window is corrupt.
  // REQUIRES: ReadHeader succeeded; scales().has(scale); called at most
  // once.
  virtual absl::Status DecodeWindow(int scale, const PixelWindow& window,
                                    DecodedWindow* out) = 0;

  // Decodes the whole image and reads the data to its end, so that corrupt
  // or truncated data anywhere is reported (DataLoss). For `stoker pack`
  // and `stoker verify --decode`. REQUIRES: ReadHeader succeeded; called at
  // most once, instead of DecodeWindow.
  virtual absl::Status DecodeAll() = 0;
};

// Size of one dimension scaled by scale/8, rounded up (as libjpeg rounds).
inline int ScaledImageSize(int size, int scale) {
  return static_cast<int>((static_cast<int64_t>(size) * scale + 7) / 8);
}

// The DataLoss for an image over `max_pixels`, as every decoder words it.
absl::Status OverPixelLimitError(int64_t width, int64_t height,
                                 int64_t max_pixels);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_DECODERS_IMAGE_DECODER_H_
