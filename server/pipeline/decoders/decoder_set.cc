#include "server/pipeline/decoders/decoder_set.h"

namespace stoker::pipeline {
namespace {

// The inline slot when it is free, else a new decoder in `more`.
template <typename Decoder>
ImageDecoder* Make(std::optional<Decoder>& slot,
                   std::vector<std::unique_ptr<ImageDecoder>>& more,
                   int64_t max_pixels) {
  if (!slot.has_value()) return &slot.emplace(max_pixels);
  more.push_back(std::make_unique<Decoder>(max_pixels));
  return more.back().get();
}

}  // namespace

absl::StatusOr<ImageDecoder*> DecoderSet::Open(std::string_view bytes) {
  ImageDecoder* decoder = nullptr;
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kJpeg:
      decoder = Make(jpeg_, more_, max_pixels_);
      break;
    case ImageFormat::kPng:
      decoder = Make(png_, more_, max_pixels_);
      break;
    case ImageFormat::kUnknown:
      return UnknownFormatError(bytes);
  }
  if (absl::Status s = decoder->ReadHeader(bytes); !s.ok()) return s;
  return decoder;
}

absl::Status ValidateImage(std::string_view bytes) {
  DecoderSet decoders(kMaxDecodePixelsCeiling);
  absl::StatusOr<ImageDecoder*> decoder = decoders.Open(bytes);
  if (!decoder.ok()) return decoder.status();
  return (*decoder)->DecodeAll();
}

}  // namespace stoker::pipeline
