#include "server/pipeline/decoders/tiff_decoder.h"

#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace stoker::pipeline {

struct TiffDecoder::State {
  TIFF* tiff = nullptr;
  std::string_view data;
  uint64_t pos = 0;
  char message[256] = "";  // libtiff's first error.
};

namespace {

using State = TiffDecoder::State;

State* Of(thandle_t h) { return static_cast<State*>(h); }

tmsize_t ReadProc(thandle_t h, void* out, tmsize_t size) {
  State* s = Of(h);
  if (size < 0 || s->pos >= s->data.size()) return 0;
  const uint64_t n =
      std::min<uint64_t>(static_cast<uint64_t>(size), s->data.size() - s->pos);
  std::memcpy(out, s->data.data() + s->pos, n);
  s->pos += n;
  return static_cast<tmsize_t>(n);
}

tmsize_t WriteProc(thandle_t, void*, tmsize_t) { return -1; }

toff_t SeekProc(thandle_t h, toff_t offset, int whence) {
  State* s = Of(h);
  uint64_t base = 0;
  if (whence == SEEK_CUR) base = s->pos;
  if (whence == SEEK_END) base = s->data.size();
  // Past the end is allowed, as for a file; reads there return nothing.
  s->pos = base + offset;
  return s->pos;
}

int CloseProc(thandle_t) { return 0; }
toff_t SizeProc(thandle_t h) { return Of(h)->data.size(); }

int OnError(TIFF*, void* user, const char* module, const char* fmt,
            va_list args) {
  State* s = static_cast<State*>(user);
  if (s->message[0] == '\0') {
    char text[200];
    std::vsnprintf(text, sizeof(text), fmt, args);
    std::snprintf(s->message, sizeof(s->message), "%s: %s",
                  module != nullptr ? module : "libtiff", text);
  }
  return 1;  // Handled: libtiff's global handler is not called.
}

int OnWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

}  // namespace

TiffDecoder::TiffDecoder(int64_t max_pixels)
    : max_pixels_(std::min(max_pixels, kMaxDecodePixelsCeiling)),
      state_(std::make_unique<State>()) {}

TiffDecoder::~TiffDecoder() {
  if (state_->tiff != nullptr) TIFFClose(state_->tiff);
}

absl::Status TiffDecoder::Error(std::string_view what) const {
  return absl::DataLossError(absl::StrCat(
      "undecodable TIFF: ", std::string(what),
      state_->message[0] != '\0' ? absl::StrCat(" (", state_->message, ")")
                                 : std::string()));
}

absl::Status TiffDecoder::ReadHeader(std::string_view tiff) {
  state_->data = tiff;
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  if (options == nullptr) {
    return absl::ResourceExhaustedError("libtiff: cannot allocate options");
  }
  TIFFOpenOptionsSetErrorHandlerExtR(options, OnError, state_.get());
  TIFFOpenOptionsSetWarningHandlerExtR(options, OnWarning, state_.get());
  // "r": read; "m": no memory mapping (there is no file); "c"-less: strips
  // are not chopped, so a huge strip is refused by the limit below first.
  state_->tiff = TIFFClientOpenExt("record", "rm", state_.get(), ReadProc,
                                   WriteProc, SeekProc, CloseProc, SizeProc,
                                   nullptr, nullptr, options);
  TIFFOpenOptionsFree(options);
  if (state_->tiff == nullptr) return Error("cannot read the header");
  uint32_t w = 0, h = 0;
  if (TIFFGetField(state_->tiff, TIFFTAG_IMAGEWIDTH, &w) != 1 ||
      TIFFGetField(state_->tiff, TIFFTAG_IMAGELENGTH, &h) != 1 || w == 0 ||
      h == 0 || w > (1u << 30) || h > (1u << 30)) {
    return Error(absl::StrCat("image size ", w, "x", h));
  }
  width_ = static_cast<int>(w);
  height_ = static_cast<int>(h);
  if (static_cast<int64_t>(width_) * height_ > max_pixels_) {
    return OverPixelLimitError(width_, height_, max_pixels_);
  }
  return absl::OkStatus();
}

absl::Status TiffDecoder::DecodeRgba(std::unique_ptr<uint32_t[]>* raster) {
  TIFF* t = state_->tiff;
  // As PIL's convert("RGB"): alpha dropped, not premultiplied into the
  // colour; the orientation tag not applied.
  uint16_t extra = 0;
  const uint16_t* kinds = nullptr;
  if (TIFFGetField(t, TIFFTAG_EXTRASAMPLES, &extra, &kinds) == 1 && extra > 0) {
    std::unique_ptr<uint16_t[]> unspecified(new uint16_t[extra]);
    std::fill_n(unspecified.get(), extra, EXTRASAMPLE_UNSPECIFIED);
    TIFFSetField(t, TIFFTAG_EXTRASAMPLES, extra, unspecified.get());
  }
  TIFFSetField(t, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
  char reason[1024];
  if (TIFFRGBAImageOK(t, reason) != 1) {
    return Error(absl::StrCat("libtiff cannot convert it to RGB: ", reason));
  }
  raster->reset(new uint32_t[static_cast<size_t>(width_) * height_]);
  if (TIFFReadRGBAImageOriented(t, width_, height_, raster->get(),
                                ORIENTATION_TOPLEFT,
                                /*stop_on_error=*/1) != 1 ||
      state_->message[0] != '\0') {
    return Error("decoding");
  }
  return absl::OkStatus();
}

absl::Status TiffDecoder::DecodeWindow(int scale, const PixelWindow& window,
                                       DecodedWindow* out) {
  if (absl::Status s = CheckDecodeWindow("TIFF", ScaleSet::Only8(), scale,
                                         window, width_, height_);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<uint32_t[]> raster;
  if (absl::Status s = DecodeRgba(&raster); !s.ok()) return s;
  out->PrepareRgb(window, static_cast<size_t>(window.width()) * 3,
                  window.height());
  for (int y = window.y0; y < window.y1; ++y) {
    const uint32_t* src =
        raster.get() + static_cast<size_t>(y) * width_ + window.x0;
    uint8_t* dst = out->buffer.get() + (y - window.y0) * out->stride;
    for (int x = 0; x < window.width(); ++x, dst += 3) {
      dst[0] = static_cast<uint8_t>(TIFFGetR(src[x]));
      dst[1] = static_cast<uint8_t>(TIFFGetG(src[x]));
      dst[2] = static_cast<uint8_t>(TIFFGetB(src[x]));
    }
  }
  return absl::OkStatus();
}

absl::Status TiffDecoder::DecodeAll() {
  std::unique_ptr<uint32_t[]> raster;
  return DecodeRgba(&raster);
}

}  // namespace stoker::pipeline
