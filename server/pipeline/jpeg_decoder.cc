#include "server/pipeline/jpeg_decoder.h"

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>

// jpeglib.h needs size_t and FILE declared before it.
// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker::pipeline {
namespace {

// libjpeg's error manager extended with a jump target and the message of the
// first error or warning.
struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JumpWithMessage(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

void OnError(j_common_ptr cinfo) { JumpWithMessage(cinfo); }

// Level -1 is a warning: libjpeg would carry on past corrupt or truncated
// data and fill in grey, which must not reach a trainer. Higher levels are
// trace messages and are dropped.
void OnMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) JumpWithMessage(cinfo);
}

void DropOutput(j_common_ptr) {}

// Names a few formats that are often stored under a .jpg name by mistake.
absl::string_view SniffFormat(absl::string_view bytes) {
  if (bytes.substr(0, 8) == absl::string_view("\x89PNG\r\n\x1a\n", 8)) {
    return " (looks like PNG)";
  }
  if (bytes.substr(0, 4) == "GIF8") return " (looks like GIF)";
  if (bytes.size() >= 12 && bytes.substr(0, 4) == "RIFF" &&
      bytes.substr(8, 4) == "WEBP") {
    return " (looks like WebP)";
  }
  if (bytes.substr(0, 2) == "BM") return " (looks like BMP)";
  return "";
}

// Converts one row of CMYK to RGB. Adobe writes inverted CMYK (0 = full
// ink); the others store plain ink amounts. The conversion is the naive
// one (no colour management), as Pillow and OpenCV do.
void CmykRowToRgb(const uint8_t* cmyk, int width, bool inverted, uint8_t* rgb) {
  for (int x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    int c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    // a*b/255 is never exactly half way, so +127 rounds to nearest.
    rgb[0] = static_cast<uint8_t>((c * k + 127) / 255);
    rgb[1] = static_cast<uint8_t>((m * k + 127) / 255);
    rgb[2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  bool cmyk = false;  // Decoded as CMYK and converted here.
};

JpegDecoder::JpegDecoder(int64_t max_pixels)
    : max_pixels_(std::min(max_pixels, kMaxDecodePixelsCeiling)),
      state_(std::make_unique<State>()) {
  jpeg_decompress_struct& cinfo = state_->cinfo;
  cinfo.err = jpeg_std_error(&state_->err.pub);
  state_->err.pub.error_exit = OnError;
  state_->err.pub.emit_message = OnMessage;
  state_->err.pub.output_message = DropOutput;
  state_->err.message[0] = '\0';
  // jpeg_create_decompress only fails on out-of-memory or a library
  // mismatch, both of which reach OnError; make that a clean abort.
  if (setjmp(state_->err.jump)) std::abort();
  jpeg_create_decompress(&cinfo);
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

int JpegDecoder::width() const {
  return static_cast<int>(state_->cinfo.image_width);
}

int JpegDecoder::height() const {
  return static_cast<int>(state_->cinfo.image_height);
}

absl::Status JpegDecoder::Error() const {
  return absl::DataLossError(
      absl::StrCat("undecodable JPEG: ", state_->err.message,
                   SniffFormat(absl::string_view(jpeg_.data(), jpeg_.size()))));
}

absl::Status JpegDecoder::ReadHeader(std::string_view jpeg) {
  jpeg_ = jpeg;
  if (jpeg.empty()) return absl::DataLossError("undecodable JPEG: no bytes");
  if (!ReadHeaderGuarded(reinterpret_cast<const uint8_t*>(jpeg.data()),
                         jpeg.size())) {
    return Error();
  }
  jpeg_decompress_struct& cinfo = state_->cinfo;
  // Checked from the header, before jpeg_start_decompress allocates the
  // coefficient or row buffers that a decode of this size would need.
  const int64_t pixels =
      static_cast<int64_t>(cinfo.image_width) * cinfo.image_height;
  if (pixels > max_pixels_) {
    return OverPixelLimitError(cinfo.image_width, cinfo.image_height,
                               max_pixels_);
  }
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB:
      cinfo.out_color_space = JCS_RGB;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      cinfo.out_color_space = JCS_CMYK;
      state_->cmyk = true;
      break;
    default:
      return absl::DataLossError(
          absl::StrCat("undecodable JPEG: unsupported colour space with ",
                       cinfo.num_components, " components"));
  }
  return absl::OkStatus();
}

bool JpegDecoder::ReadHeaderGuarded(const uint8_t* data, size_t size) {
  jpeg_decompress_struct* cinfo = &state_->cinfo;
  if (setjmp(state_->err.jump)) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  return true;
}

bool JpegDecoder::StartGuarded(int scale, int* out_width, int* out_height) {
  jpeg_decompress_struct* cinfo = &state_->cinfo;
  if (setjmp(state_->err.jump)) return false;
  cinfo->scale_num = static_cast<unsigned int>(scale);
  cinfo->scale_denom = 8;
  jpeg_start_decompress(cinfo);
  *out_width = static_cast<int>(cinfo->output_width);
  *out_height = static_cast<int>(cinfo->output_height);
  return true;
}

bool JpegDecoder::CropAndSkipGuarded(const PixelWindow& window, int* crop_x,
                                     int* crop_width) {
  jpeg_decompress_struct* cinfo = &state_->cinfo;
  if (setjmp(state_->err.jump)) return false;
  // Fancy chroma upsampling treats the ends of a cropped row as image
  // edges. Decoding one more column on the left (libjpeg then starts a
  // whole iMCU earlier when x0 is on a boundary) and a chroma sample's
  // width more on the right keeps those edges out of the window, so the
  // window equals the same pixels of a full decode.
  const int x0 = std::max(window.x0 - 1, 0);
  const int x1 = std::min(window.x1 + cinfo->max_h_samp_factor,
                          static_cast<int>(cinfo->output_width));
  JDIMENSION x = static_cast<JDIMENSION>(x0);
  JDIMENSION w = static_cast<JDIMENSION>(x1 - x0);
  jpeg_crop_scanline(cinfo, &x, &w);
  if (window.y0 > 0) {
    jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(window.y0));
  }
  *crop_x = static_cast<int>(x);
  *crop_width = static_cast<int>(w);
  return true;
}

bool JpegDecoder::ReadRowsGuarded(int rows, uint8_t* dst, size_t stride,
                                  uint8_t* cmyk_row, int width) {
  jpeg_decompress_struct* cinfo = &state_->cinfo;
  if (setjmp(state_->err.jump)) return false;
  const bool inverted = cinfo->saw_Adobe_marker;
  for (int y = 0; y < rows; ++y) {
    uint8_t* row = dst + static_cast<size_t>(y) * stride;
    JSAMPROW target = cmyk_row != nullptr ? cmyk_row : row;
    // One row per call: libjpeg returns at most one here, and a short read
    // only happens on a suspending source, which the memory source is not.
    if (jpeg_read_scanlines(cinfo, &target, 1) != 1) {
      std::snprintf(state_->err.message, sizeof(state_->err.message),
                    "decoder stopped at row %d", y);
      return false;
    }
    if (cmyk_row != nullptr) CmykRowToRgb(cmyk_row, width, inverted, row);
  }
  return true;
}

absl::Status JpegDecoder::DecodeWindow(int scale, const PixelWindow& window,
                                       DecodedWindow* out) {
  int scaled_width = 0, scaled_height = 0;
  if (!StartGuarded(scale, &scaled_width, &scaled_height)) return Error();
  if (absl::Status s = CheckDecodeWindow("JPEG", ScaleSet::All(), scale, window,
                                         scaled_width, scaled_height);
      !s.ok()) {
    return s;
  }
  int crop_x = 0, crop_width = 0;
  if (!CropAndSkipGuarded(window, &crop_x, &crop_width)) return Error();

  out->PrepareRgb(window, static_cast<size_t>(crop_width) * 3, window.height(),
                  static_cast<size_t>(window.x0 - crop_x) * 3);
  std::vector<uint8_t> cmyk_row(state_->cmyk ? crop_width * 4 : 0);
  const bool ok =
      ReadRowsGuarded(window.height(), out->buffer.get(), out->stride,
                      state_->cmyk ? cmyk_row.data() : nullptr, crop_width);
  // The rows below the window are never decoded; abort drops them.
  jpeg_abort_decompress(&state_->cinfo);
  return ok ? absl::OkStatus() : Error();
}

bool JpegDecoder::DecodeAllGuarded(uint8_t* row) {
  jpeg_decompress_struct* cinfo = &state_->cinfo;
  if (setjmp(state_->err.jump)) return false;
  while (cinfo->output_scanline < cinfo->output_height) {
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

absl::Status JpegDecoder::DecodeAll(int scale) {
  int scaled_width = 0, scaled_height = 0;
  if (!StartGuarded(scale, &scaled_width, &scaled_height)) return Error();
  std::vector<uint8_t> row(static_cast<size_t>(scaled_width) *
                           state_->cinfo.output_components);
  return DecodeAllGuarded(row.data()) ? absl::OkStatus() : Error();
}

absl::Status ValidateJpeg(std::string_view jpeg) {
  JpegDecoder decoder(kMaxDecodePixelsCeiling);
  if (absl::Status s = decoder.ReadHeader(jpeg); !s.ok()) return s;
  return decoder.DecodeAll(1);
}

}  // namespace stoker::pipeline
