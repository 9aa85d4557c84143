// PngDecoder: libpng behind absl::Status; the PNG ImageDecoder.
//
// A window decodes only the rows down to its bottom edge: the rows above it
// pass through one scratch row, the window's rows have their columns
// cropped while they are copied out, and decoding stops after the last
// one. An interlaced (Adam7) image cannot be read row by row, so it is
// decoded whole, then cropped. PNG has no scaled decoding: scale 8 only.
//
// Colours follow PIL's Image.convert("RGB"), which a torchvision user's
// loader runs: a palette is expanded, gray is replicated into R, G and B,
// alpha (an alpha channel or a tRNS chunk) is dropped, not composited over
// a background, and 16-bit samples keep their high byte (PIL does the same
// for RGB; for 16-bit gray PIL clips the value to 255 instead, which is not
// copied). gAMA, cHRM, sRGB and iCCP are ignored, as PIL ignores them.
// Every libpng error (bad CRC, bad zlib data, truncation) is DataLoss;
// libpng's warnings (an ancillary chunk it skips) are not.
//
// Thread-safety: not thread-safe; one decoder per image.
#ifndef STOKER_SERVER_PIPELINE_DECODERS_PNG_DECODER_H_
#define STOKER_SERVER_PIPELINE_DECODERS_PNG_DECODER_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "server/pipeline/decoders/image_decoder.h"

namespace stoker::pipeline {

class PngDecoder final : public ImageDecoder {
 public:
  // `max_pixels` bounds width x height; at most kMaxDecodePixelsCeiling.
  explicit PngDecoder(int64_t max_pixels = kDefaultMaxDecodePixels);
  ~PngDecoder() override;

  PngDecoder(const PngDecoder&) = delete;
  PngDecoder& operator=(const PngDecoder&) = delete;

  absl::Status ReadHeader(std::string_view png) override;
  int width() const override;
  int height() const override;
  // REQUIRES: scale == 8 (Internal otherwise).
  absl::Status DecodeWindow(int scale, const PixelWindow& window,
                            DecodedWindow* out) override;
  absl::Status DecodeAll() override;

  // Whether the image is Adam7-interlaced. REQUIRES: ReadHeader succeeded.
  bool interlaced() const;

  // libpng's state and what its callbacks read and write; in the .cc file.
  struct State;

 private:
  // Each wraps a run of libpng calls in setjmp, with no C++ objects with
  // destructors in its frame, so libpng's longjmp skips no cleanup. They
  // return false after an error, whose text is then in the state.
  bool ReadHeaderGuarded();
  bool ReadRowsGuarded(int rows, uint8_t* row, const PixelWindow& window,
                       uint8_t* dst, size_t stride);
  bool ReadImageGuarded(uint8_t** rows);
  bool DecodeAllGuarded(uint8_t* row);

  absl::Status Error() const;

  const int64_t max_pixels_;
  std::unique_ptr<State> state_;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_DECODERS_PNG_DECODER_H_
