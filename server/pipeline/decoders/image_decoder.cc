#include "server/pipeline/decoders/image_decoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker::pipeline {

void DecodedWindow::PrepareRgb(const PixelWindow& window, size_t row_stride,
                               size_t rows, size_t first) {
  width = window.width();
  height = window.height();
  channels = 3;
  stride = row_stride;
  first_byte = first;
  const size_t bytes = row_stride * rows;
  if (buffer == nullptr || buffer_size < bytes) {
    buffer.reset(new uint8_t[bytes]);  // Default-initialized: no memset.
    buffer_size = bytes;
  }
}

absl::Status CheckDecodeWindow(std::string_view format, ScaleSet scales,
                               int scale, const PixelWindow& window, int width,
                               int height) {
  if (scales.has(scale) && window.x0 >= 0 && window.y0 >= 0 &&
      window.x1 <= width && window.y1 <= height && window.width() > 0 &&
      window.height() > 0) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(
      std::string(format), " window [", window.x0, ",", window.x1, ")x[",
      window.y0, ",", window.y1, ") at scale ", scale, "/8 outside the ", width,
      "x", height, " image at that scale, or a scale it lacks"));
}

ImageFormat SniffImageFormat(std::string_view bytes) {
  if (bytes.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) {
    return ImageFormat::kJpeg;
  }
  if (bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) {
    return ImageFormat::kPng;
  }
  if (bytes.size() >= 12 && bytes.substr(0, 4) == "RIFF" &&
      bytes.substr(8, 4) == "WEBP") {
    return ImageFormat::kWebp;
  }
  if (bytes.size() >= 4 && ((bytes.substr(0, 3) == "II*" && bytes[3] == '\0') ||
                            (bytes.substr(0, 3) == "II+" && bytes[3] == '\0') ||
                            (bytes.substr(0, 2) == "MM" && bytes[2] == '\0' &&
                             (bytes[3] == '*' || bytes[3] == '+')))) {
    return ImageFormat::kTiff;
  }
  return ImageFormat::kUnknown;
}

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kTiff:
      return "TIFF";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

absl::Status UnknownFormatError(std::string_view bytes) {
  constexpr char kNot[] = "not JPEG, PNG, WebP or TIFF";
  if (bytes.empty())
    return absl::DataLossError(absl::StrCat(kNot, " (no bytes)"));
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (i > 0) start += ' ';
    start += kHex[b >> 4];
    start += kHex[b & 15];
  }
  return absl::DataLossError(absl::StrCat(kNot, " (starts ", start, ")"));
}

absl::Status OverPixelLimitError(int64_t width, int64_t height,
                                 int64_t max_pixels) {
  return absl::DataLossError(absl::StrCat(
      "image ", width, "x", height, " (", width * height,
      " pixels) is over limits.max_decode_pixels (", max_pixels, ")"));
}

}  // namespace stoker::pipeline
