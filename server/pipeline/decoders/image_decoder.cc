#include "server/pipeline/decoders/image_decoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker::pipeline {

ImageFormat SniffImageFormat(std::string_view bytes) {
  if (bytes.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) {
    return ImageFormat::kJpeg;
  }
  if (bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) {
    return ImageFormat::kPng;
  }
  return ImageFormat::kUnknown;
}

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

absl::Status UnknownFormatError(std::string_view bytes) {
  if (bytes.empty()) return absl::DataLossError("not JPEG or PNG (no bytes)");
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (i > 0) start += ' ';
    start += kHex[b >> 4];
    start += kHex[b & 15];
  }
  return absl::DataLossError(
      absl::StrCat("not JPEG or PNG (starts ", start, ")"));
}

absl::Status OverPixelLimitError(int64_t width, int64_t height,
                                 int64_t max_pixels) {
  return absl::DataLossError(absl::StrCat(
      "image ", width, "x", height, " (", width * height,
      " pixels) is over limits.max_decode_pixels (", max_pixels, ")"));
}

}  // namespace stoker::pipeline
