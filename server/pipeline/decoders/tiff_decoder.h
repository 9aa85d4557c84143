// TiffDecoder: libtiff behind absl::Status; the TIFF ImageDecoder.
//
// The header (the first directory) gives the size, so the pixel limit is
// checked before any pixel is decoded. A window decodes the whole first
// page through libtiff's RGBA interface (TIFFReadRGBAImageOriented, which
// handles every photometric, bit depth, planar layout and compression
// libtiff reads) and crops it: TIFFs are rare in training data, and what
// matters is that a sample in one is not lost.
//
// Colours follow PIL's Image.convert("RGB"), which a torchvision user's
// loader runs: palette expanded, gray replicated, alpha dropped, not
// composited (the extra samples are marked unspecified before reading, so
// libtiff does not premultiply an unassociated alpha), and the orientation
// tag ignored, as PIL ignores it when opening. 16-bit samples become 8-bit
// by libtiff's scaling. Every libtiff error is DataLoss; its warnings (an
// unknown tag) are not.
//
// Thread-safety: not thread-safe; one decoder per image. Errors are caught
// per handle (TIFFOpenOptions), never through libtiff's global handlers.
#ifndef STOKER_SERVER_PIPELINE_DECODERS_TIFF_DECODER_H_
#define STOKER_SERVER_PIPELINE_DECODERS_TIFF_DECODER_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "server/pipeline/decoders/image_decoder.h"

namespace stoker::pipeline {

class TiffDecoder final : public ImageDecoder {
 public:
  // `max_pixels` bounds width x height; at most kMaxDecodePixelsCeiling.
  explicit TiffDecoder(int64_t max_pixels = kDefaultMaxDecodePixels);
  ~TiffDecoder() override;

  TiffDecoder(const TiffDecoder&) = delete;
  TiffDecoder& operator=(const TiffDecoder&) = delete;

  absl::Status ReadHeader(std::string_view tiff) override;
  int width() const override { return width_; }
  int height() const override { return height_; }
  // REQUIRES: scale == 8 (Internal otherwise).
  absl::Status DecodeWindow(int scale, const PixelWindow& window,
                            DecodedWindow* out) override;
  absl::Status DecodeAll() override;

  // The open handle and what libtiff's callbacks read; in the .cc file.
  struct State;

 private:
  // The whole page as ABGR words, top row first, or DataLoss.
  absl::Status DecodeRgba(std::unique_ptr<uint32_t[]>* raster);
  absl::Status Error(std::string_view what) const;

  const int64_t max_pixels_;
  std::unique_ptr<State> state_;
  int width_ = 0, height_ = 0;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_DECODERS_TIFF_DECODER_H_
