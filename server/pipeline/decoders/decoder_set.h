// DecoderSet: the decoders of one sample's images, each chosen by the
// image's content (SniffImageFormat), and ValidateImage, the full check
// `stoker pack` and `stoker verify --decode` run on an encoded image.
//
// A set lives on the worker's stack for one sample's run and owns the
// decoders it hands out. The first decoder of each format is held inline,
// so a sample with one image allocates nothing here beyond what that
// decoder itself allocates (the JPEG path allocated the same before).
//
// Thread-safety: not thread-safe; one set per sample.
#ifndef STOKER_SERVER_PIPELINE_DECODERS_DECODER_SET_H_
#define STOKER_SERVER_PIPELINE_DECODERS_DECODER_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/pipeline/decoders/image_decoder.h"
#include "server/pipeline/decoders/png_decoder.h"
#include "server/pipeline/jpeg_decoder.h"

namespace stoker::pipeline {

class DecoderSet {
 public:
  // Every decoder refuses images over `max_pixels` (width x height).
  explicit DecoderSet(int64_t max_pixels = kDefaultMaxDecodePixels)
      : max_pixels_(max_pixels) {}

  DecoderSet(const DecoderSet&) = delete;
  DecoderSet& operator=(const DecoderSet&) = delete;

  // Sniffs `bytes`, makes a decoder for its format and reads its header.
  // The decoder is borrowed until the set is destroyed; `bytes` must stay
  // alive and unchanged as long. FailedPrecondition for a format this
  // build has no decoder for (FormatBuilt). DataLoss for bytes of no
  // supported format ("not JPEG, PNG, WebP or TIFF (starts 47 49 46 38)") and for a header its decoder refuses.
  absl::StatusOr<ImageDecoder*> Open(std::string_view bytes);

 private:
  const int64_t max_pixels_;
  std::optional<JpegDecoder> jpeg_;
  std::optional<PngDecoder> png_;
  // Decoders after the first of their format (several images per sample).
  std::vector<std::unique_ptr<ImageDecoder>> more_;
};

// OK if this build decodes `format`; else FailedPrecondition naming the
// Debian package that would add it ("... install libwebp-dev and rebuild"):
// a missing decoder is the daemon's defect, not a bad sample, so a stream
// fails on it even under on_corrupt: skip. JPEG and PNG are always built.
absl::Status FormatBuilt(ImageFormat format);

// The formats this build decodes, and those it was built without, for
// `stokerd --version`: "JPEG PNG WebP TIFF", or e.g. "JPEG PNG TIFF (built
// without: WebP)".
std::string DescribeImageFormats();

// Fully decodes `bytes` as its sniffed format (JPEG at scale 1/8, which
// still reads every Huffman-coded block; PNG every row, to IEND). OK or
// DataLoss with the reason. The size limit is the ceiling: a dataset may
// hold images that a daemon's limit refuses. Replaces ValidateJpeg.
absl::Status ValidateImage(std::string_view bytes);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_DECODERS_DECODER_SET_H_
