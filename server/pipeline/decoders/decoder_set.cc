#include "server/pipeline/decoders/decoder_set.h"

#include "absl/strings/str_cat.h"
#ifdef STOKER_HAVE_WEBP
#include "server/pipeline/decoders/webp_decoder.h"
#endif
#ifdef STOKER_HAVE_TIFF
#include "server/pipeline/decoders/tiff_decoder.h"
#endif

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

absl::Status FormatBuilt(ImageFormat format) {
  switch (format) {
    case ImageFormat::kWebp:
#ifndef STOKER_HAVE_WEBP
      return absl::FailedPreconditionError(
          "a WebP image, but this build has no WebP decoder: install "
          "libwebp-dev and rebuild");
#endif
      break;
    case ImageFormat::kTiff:
#ifndef STOKER_HAVE_TIFF
      return absl::FailedPreconditionError(
          "a TIFF image, but this build has no TIFF decoder: install "
          "libtiff-dev and rebuild");
#endif
      break;
    case ImageFormat::kJpeg:
    case ImageFormat::kPng:
    case ImageFormat::kUnknown:
      break;
  }
  return absl::OkStatus();
}

std::string DescribeImageFormats() {
  std::string built, without;
  for (ImageFormat f : {ImageFormat::kJpeg, ImageFormat::kPng,
                        ImageFormat::kWebp, ImageFormat::kTiff}) {
    std::string& list = FormatBuilt(f).ok() ? built : without;
    if (!list.empty()) list += ' ';
    list += std::string(ImageFormatName(f));
  }
  return without.empty() ? built
                         : absl::StrCat(built, " (built without: ", without, ")");
}

absl::StatusOr<ImageDecoder*> DecoderSet::Open(std::string_view bytes) {
  ImageDecoder* decoder = nullptr;
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kJpeg:
      decoder = Make(jpeg_, more_, max_pixels_);
      break;
    case ImageFormat::kPng:
      decoder = Make(png_, more_, max_pixels_);
      break;
    case ImageFormat::kWebp:
#ifdef STOKER_HAVE_WEBP
      more_.push_back(std::make_unique<WebpDecoder>(max_pixels_));
      decoder = more_.back().get();
      break;
#else
      return FormatBuilt(ImageFormat::kWebp);
#endif
    case ImageFormat::kTiff:
#ifdef STOKER_HAVE_TIFF
      more_.push_back(std::make_unique<TiffDecoder>(max_pixels_));
      decoder = more_.back().get();
      break;
#else
      return FormatBuilt(ImageFormat::kTiff);
#endif
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
