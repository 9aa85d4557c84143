#include "server/pipeline/decoders/webp_decoder.h"

#include <webp/decode.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"

namespace stoker::pipeline {
namespace {

// Pixels decoded beyond each side of a window. libwebp's fancy upsampling
// treats a crop's edges as the image's (it mirrors chroma there), so the
// outermost row or column of a tight crop differs from the whole decode;
// one chroma sample (2 pixels) past each edge keeps the window exact.
constexpr int kMargin = 2;

const char* StatusName(VP8StatusCode code) {
  switch (code) {
    case VP8_STATUS_OK:
      return "ok";
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
      return "suspended";
    case VP8_STATUS_USER_ABORT:
      return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "truncated: not enough data";
  }
  return "unknown error";
}

absl::Status WebpError(std::string_view what, VP8StatusCode code) {
  return absl::DataLossError(absl::StrCat(
      "undecodable WebP: ", std::string(what), ": ", StatusName(code)));
}

// Decodes `data` cropped to [x0, x0 + width) x [y0, y0 + height) as RGB into
// `dst` (`stride` bytes per row). x0 and y0 must be even.
absl::Status DecodeCropped(std::string_view data, int x0, int y0, int width,
                           int height, uint8_t* dst, size_t stride) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) {
    return absl::InternalError(
        "libwebp: version mismatch in WebPInitDecoderConfig");
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  config.options.use_cropping = 1;
  config.options.crop_left = x0;
  config.options.crop_top = y0;
  config.options.crop_width = width;
  config.options.crop_height = height;
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = dst;
  config.output.u.RGBA.stride = static_cast<int>(stride);
  config.output.u.RGBA.size = stride * static_cast<size_t>(height);
  const VP8StatusCode code = WebPDecode(bytes, data.size(), &config);
  WebPFreeDecBuffer(&config.output);  // Frees nothing external; required.
  if (code != VP8_STATUS_OK) return WebpError("decoding", code);
  return absl::OkStatus();
}

}  // namespace

WebpDecoder::WebpDecoder(int64_t max_pixels)
    : max_pixels_(std::min(max_pixels, kMaxDecodePixelsCeiling)) {}

absl::Status WebpDecoder::ReadHeader(std::string_view webp) {
  data_ = webp;
  WebPBitstreamFeatures features;
  const VP8StatusCode code = WebPGetFeatures(
      reinterpret_cast<const uint8_t*>(webp.data()), webp.size(), &features);
  if (code != VP8_STATUS_OK) return WebpError("reading the header", code);
  if (features.has_animation) {
    return absl::DataLossError(
        "undecodable WebP: animated; a sample's image must be one frame");
  }
  width_ = features.width;
  height_ = features.height;
  const int64_t pixels = static_cast<int64_t>(width_) * height_;
  if (width_ <= 0 || height_ <= 0) {
    return absl::DataLossError(
        absl::StrCat("undecodable WebP: size ", width_, "x", height_));
  }
  if (pixels > max_pixels_) {
    return OverPixelLimitError(width_, height_, max_pixels_);
  }
  return absl::OkStatus();
}

absl::Status WebpDecoder::DecodeWindow(int scale, const PixelWindow& window,
                                       DecodedWindow* out) {
  if (absl::Status s = CheckDecodeWindow("WebP", ScaleSet::Only8(), scale,
                                         window, width_, height_);
      !s.ok()) {
    return s;
  }
  // A margin on every side, the origin even: see the header comment.
  const int x0 = std::max(0, window.x0 - kMargin) & ~1;
  const int y0 = std::max(0, window.y0 - kMargin) & ~1;
  const int width = std::min(width_, window.x1 + kMargin) - x0;
  const int height = std::min(height_, window.y1 + kMargin) - y0;
  const size_t stride = static_cast<size_t>(width) * 3;
  out->PrepareRgb(window, stride, height,
                  static_cast<size_t>(window.y0 - y0) * stride +
                      static_cast<size_t>(window.x0 - x0) * 3);
  return DecodeCropped(data_, x0, y0, width, height, out->buffer.get(),
                       out->stride);
}

absl::Status WebpDecoder::DecodeAll() {
  const size_t stride = static_cast<size_t>(width_) * 3;
  std::unique_ptr<uint8_t[]> image(new uint8_t[stride * height_]);
  return DecodeCropped(data_, 0, 0, width_, height_, image.get(), stride);
}

}  // namespace stoker::pipeline
