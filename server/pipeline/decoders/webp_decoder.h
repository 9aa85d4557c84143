// WebpDecoder: libwebp behind absl::Status; the WebP ImageDecoder.
//
// A window is decoded by libwebp's cropping (WebPDecoderConfig.options):
// only the macroblocks under the window are reconstructed. The crop asked
// for is the window plus 2 pixels on each side, its origin even, where
// libwebp keeps lossy chroma aligned: libwebp upsamples chroma at a crop's
// edges as at the image's, so a tight crop's outer pixels would differ from
// the whole decode. DecodedWindow.first_byte skips the margin, as the JPEG
// decoder skips to its iMCU boundary. A window is then byte for byte the
// whole decode cropped (image_formats_test). No scaled decoding: scale 8
// only.
//
// Colours follow PIL's Image.convert("RGB"): alpha is dropped, not
// composited (libwebp's MODE_RGB). An animated WebP is DataLoss: a sample is
// one image. Every libwebp error is DataLoss.
//
// Thread-safety: not thread-safe; one decoder per image.
#ifndef STOKER_SERVER_PIPELINE_DECODERS_WEBP_DECODER_H_
#define STOKER_SERVER_PIPELINE_DECODERS_WEBP_DECODER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "server/pipeline/decoders/image_decoder.h"

namespace stoker::pipeline {

class WebpDecoder final : public ImageDecoder {
 public:
  // `max_pixels` bounds width x height; at most kMaxDecodePixelsCeiling.
  explicit WebpDecoder(int64_t max_pixels = kDefaultMaxDecodePixels);

  absl::Status ReadHeader(std::string_view webp) override;
  int width() const override { return width_; }
  int height() const override { return height_; }
  // REQUIRES: scale == 8 (Internal otherwise).
  absl::Status DecodeWindow(int scale, const PixelWindow& window,
                            DecodedWindow* out) override;
  absl::Status DecodeAll() override;

 private:
  const int64_t max_pixels_;
  std::string_view data_;
  int width_ = 0, height_ = 0;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_DECODERS_WEBP_DECODER_H_
