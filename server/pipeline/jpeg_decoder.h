// JpegDecoder: libjpeg-turbo behind absl::Status, for the fused decode path;
// the JPEG ImageDecoder (decoders/image_decoder.h).
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
#include "server/pipeline/decoders/image_decoder.h"

namespace stoker::pipeline {

class JpegDecoder final : public ImageDecoder {
 public:
  // `max_pixels` bounds width x height; at most kMaxDecodePixelsCeiling.
  explicit JpegDecoder(int64_t max_pixels = kDefaultMaxDecodePixels);
  ~JpegDecoder() override;

  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header of `jpeg`, which must stay alive and unchanged until the
  // decoder is destroyed. DataLoss when it is not a decodable JPEG, or has
  // more pixels than the decoder's max_pixels ("image 9000x9000 (81000000
  // pixels) is over limits.max_decode_pixels (64000000)").
  // REQUIRES: called once, first.
  absl::Status ReadHeader(std::string_view jpeg) override;

  // The image size in pixels. REQUIRES: ReadHeader succeeded.
  int width() const override;
  int height() const override;

  // 1/8, 2/8, 4/8 and 8/8.
  ScaleSet scales() const override { return ScaleSet::Dct(); }

  // Decodes `window` of the image scaled by scale/8 into `out` as RGB.
  // The scaled image is ScaledSize(width(), scale) by
  // ScaledSize(height(), scale); the window must lie within it.
  // REQUIRES: ReadHeader succeeded; 1 <= scale <= 8; called at most once.
  absl::Status DecodeWindow(int scale, const PixelWindow& window,
                            DecodedWindow* out) override;

  // Decodes every row at scale/8, discards the pixels and reads the stream to
  // its end, so that corrupt or truncated data anywhere is reported.
  // REQUIRES: ReadHeader succeeded; called at most once, instead of
  // DecodeWindow.
  absl::Status DecodeAll(int scale);
  // DecodeAll(1): every Huffman-coded block is still read, while the IDCT
  // stays cheap.
  absl::Status DecodeAll() override { return DecodeAll(1); }

  // Size of one dimension scaled by scale/8, as libjpeg rounds it.
  static int ScaledSize(int size, int scale) {
    return ScaledImageSize(size, scale);
  }

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
