// JpegDecoder: libjpeg-turbo behind absl::Status, for the fused decode path.
//
// It reads a JPEG's header, then decodes only a window of the image at a DCT
// scale of M/8 (libjpeg-turbo's scaled IDCT, jpeg_crop_scanline for the
// columns and jpeg_skip_scanlines for the rows above), as RGB. Grayscale is
// expanded by libjpeg; CMYK and YCCK are converted here. Every libjpeg error
// and every warning (corrupt or truncated data) becomes absl::DataLossError.
//
// Thread-safety: not thread-safe; one decoder per sample. Different decoders
// may run on different threads at once.
#ifndef STOKER_SERVER_PIPELINE_JPEG_DECODER_H_
#define STOKER_SERVER_PIPELINE_JPEG_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace stoker::pipeline {

// The most pixels (width x height) a JPEG may have and still be decoded:
// the ceiling of `limits.max_decode_pixels`, and its default. The header
// alone gives the size, so a bigger image is refused before libjpeg
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

// Decoded RGB pixels of a window. libjpeg may decode a few columns to the
// left of the window (crops start on an iMCU boundary); data() skips them.
struct DecodedWindow {
  // Left uninitialized on allocation: the decoder writes every byte, and
  // zero-filling it cost 2-3% of a train sample's instructions (measured,
  // docs/performance.md).
  std::unique_ptr<uint8_t[]> buffer;
  size_t buffer_size = 0;
  size_t first_byte = 0;  // Offset of the window's top-left pixel in buffer.
  size_t stride = 0;      // Bytes from one row to the next.
  int width = 0, height = 0;
  const uint8_t* data() const { return buffer.get() + first_byte; }
};

class JpegDecoder {
 public:
  // `max_pixels` bounds width x height; at most kMaxDecodePixelsCeiling.
  explicit JpegDecoder(int64_t max_pixels = kDefaultMaxDecodePixels);
  ~JpegDecoder();

  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header of `jpeg`, which must stay alive and unchanged until the
  // decoder is destroyed. DataLoss when it is not a decodable JPEG, or has
  // more pixels than the decoder's max_pixels ("image 9000x9000 (81000000
  // pixels) is over limits.max_decode_pixels (64000000)").
  // REQUIRES: called once, first.
  absl::Status ReadHeader(std::string_view jpeg);

  // The image size in pixels. REQUIRES: ReadHeader succeeded.
  int width() const;
  int height() const;

  // Decodes `window` of the image scaled by scale/8 into `out` as RGB.
  // The scaled image is ScaledSize(width(), scale) by
  // ScaledSize(height(), scale); the window must lie within it.
  // REQUIRES: ReadHeader succeeded; 1 <= scale <= 8; called at most once.
  absl::Status DecodeWindow(int scale, const PixelWindow& window,
                            DecodedWindow* out);

  // Decodes every row at scale/8, discards the pixels and reads the stream to
  // its end, so that corrupt or truncated data anywhere is reported.
  // REQUIRES: ReadHeader succeeded; called at most once, instead of
  // DecodeWindow.
  absl::Status DecodeAll(int scale);

  // Size of one dimension scaled by scale/8, as libjpeg rounds it.
  static int ScaledSize(int size, int scale);

 private:
  struct State;

  // Each of these wraps a run of libjpeg calls in setjmp. They keep no C++
  // objects with destructors in their frames, so a longjmp out of libjpeg
  // skips nothing that needs cleanup. They return false after an error,
  // whose text is then in the error manager.
  bool ReadHeaderGuarded(const uint8_t* data, size_t size);
  bool StartGuarded(int scale, int* out_width, int* out_height);
  bool CropAndSkipGuarded(const PixelWindow& window, int* crop_x,
                          int* crop_width);
  bool ReadRowsGuarded(int rows, uint8_t* dst, size_t stride, uint8_t* cmyk_row,
                       int width);
  bool DecodeAllGuarded(uint8_t* row);

  absl::Status Error() const;

  const int64_t max_pixels_;
  std::unique_ptr<State> state_;
  std::string_view jpeg_;
};

// Fully decodes `jpeg` at scale 1/8 (every Huffman-coded block is still read,
// so truncation and corruption are caught, while the IDCT stays cheap).
// OK or DataLoss with the reason. Used by `stoker pack` and `stoker verify
// --decode`, with the ceiling as the size limit: a dataset may hold images
// that a daemon's limit refuses.
absl::Status ValidateJpeg(std::string_view jpeg);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_JPEG_DECODER_H_
