#include "server/pipeline/decoders/png_decoder.h"

#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stoker::pipeline {

struct PngDecoder::State {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::string_view data;
  size_t pos = 0;  // Next byte libpng reads.
  int width = 0, height = 0;
  int channels = 3;  // Per decoded pixel: 3, or 4 if alpha survived.
  bool interlaced = false;
  char message[256] = "";
};

namespace {

// libpng's error callback: keeps the first message and jumps back into the
// guarded function that called libpng.
[[noreturn]] void OnError(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngDecoder::State*>(png_get_error_ptr(png));
  if (state->message[0] == '\0') {
    std::snprintf(state->message, sizeof(state->message), "%s", message);
  }
  png_longjmp(png, 1);
}

// Warnings are for ancillary chunks libpng skips (a bad iCCP profile, a
// CRC error in a text chunk); the pixels are fine, as PIL also finds.
void OnWarning(png_structp, png_const_charp) {}

void ReadFromMemory(png_structp png, png_bytep out, size_t size) {
  auto* state = static_cast<PngDecoder::State*>(png_get_io_ptr(png));
  if (state->data.size() - state->pos < size) {
    png_error(png, "truncated: the data ends inside a chunk");
  }
  std::memcpy(out, state->data.data() + state->pos, size);
  state->pos += size;
}

// Copies columns [x0, x1) of a decoded row of `channels` bytes per pixel as
// RGB, dropping a fourth (alpha) byte.
void CopyColumns(const uint8_t* row, int channels, int x0, int x1,
                 uint8_t* dst) {
  if (channels == 3) {
    std::memcpy(dst, row + static_cast<size_t>(x0) * 3,
                static_cast<size_t>(x1 - x0) * 3);
    return;
  }
  const uint8_t* src = row + static_cast<size_t>(x0) * channels;
  for (int x = x0; x < x1; ++x, src += channels, dst += 3) {
    dst[0] = src[0];
    dst[1] = src[1];
    dst[2] = src[2];
  }
}

}  // namespace

PngDecoder::PngDecoder(int64_t max_pixels)
    : max_pixels_(std::min(max_pixels, kMaxDecodePixelsCeiling)),
      state_(std::make_unique<State>()) {}

PngDecoder::~PngDecoder() {
  if (state_->png != nullptr) {
    png_destroy_read_struct(&state_->png, &state_->info, nullptr);
  }
}

int PngDecoder::width() const { return state_->width; }
int PngDecoder::height() const { return state_->height; }
bool PngDecoder::interlaced() const { return state_->interlaced; }

absl::Status PngDecoder::Error() const {
  return absl::DataLossError(
      absl::StrCat("undecodable PNG: ", state_->message));
}

absl::Status PngDecoder::ReadHeader(std::string_view png) {
  state_->data = png;
  state_->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, state_.get(),
                                       OnError, OnWarning);
  if (state_->png == nullptr) {
    return absl::ResourceExhaustedError("libpng: cannot create a read struct");
  }
  state_->info = png_create_info_struct(state_->png);
  if (state_->info == nullptr) {
    return absl::ResourceExhaustedError("libpng: cannot create an info struct");
  }
  png_set_read_fn(state_->png, state_.get(), ReadFromMemory);
  if (!ReadHeaderGuarded()) return Error();
  const int64_t pixels = static_cast<int64_t>(state_->width) * state_->height;
  if (pixels > max_pixels_) {
    return OverPixelLimitError(state_->width, state_->height, max_pixels_);
  }
  return absl::OkStatus();
}

bool PngDecoder::ReadHeaderGuarded() {
  png_structp png = state_->png;
  png_infop info = state_->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  state_->width = static_cast<int>(png_get_image_width(png, info));
  state_->height = static_cast<int>(png_get_image_height(png, info));
  // ReadHeader refuses an image over the limit; png_read_update_info below
  // would allocate its row buffers first.
  if (static_cast<int64_t>(state_->width) * state_->height > max_pixels_) {
    return true;
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  // To 8-bit RGB, as PIL's convert("RGB").
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) {
    png_set_expand_gray_1_2_4_to_8(png);
  }
  if (depth == 16) png_set_strip_16(png);  // Keeps the high byte.
  if ((color & PNG_COLOR_MASK_ALPHA) != 0) png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_gray_to_rgb(png);
  }
  state_->interlaced = png_get_interlace_type(png, info) != PNG_INTERLACE_NONE;
  if (state_->interlaced) png_set_interlace_handling(png);
  png_read_update_info(png, info);
  state_->channels = png_get_channels(png, info);
  if ((state_->channels != 3 && state_->channels != 4) ||
      png_get_bit_depth(png, info) != 8 ||
      png_get_rowbytes(png, info) !=
          static_cast<size_t>(state_->width) * state_->channels) {
    png_error(png, "libpng did not convert the image to 8-bit RGB");
  }
  return true;
}

bool PngDecoder::ReadRowsGuarded(int rows, uint8_t* row,
                                 const PixelWindow& window, uint8_t* dst,
                                 size_t stride) {
  png_structp png = state_->png;
  if (setjmp(png_jmpbuf(png))) return false;
  for (int y = 0; y < rows; ++y) {
    png_read_row(png, row, nullptr);
    if (y >= window.y0) {
      CopyColumns(row, state_->channels, window.x0, window.x1,
                  dst + static_cast<size_t>(y - window.y0) * stride);
    }
  }
  return true;
}

bool PngDecoder::ReadImageGuarded(uint8_t** rows) {
  png_structp png = state_->png;
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

absl::Status PngDecoder::DecodeWindow(int scale, const PixelWindow& window,
                                      DecodedWindow* out) {
  if (absl::Status s = CheckDecodeWindow("PNG", ScaleSet::Only8(), scale,
                                         window, state_->width, state_->height);
      !s.ok()) {
    return s;
  }
  out->PrepareRgb(window, static_cast<size_t>(window.width()) * 3,
                  window.height());
  const size_t row_bytes =
      static_cast<size_t>(state_->width) * state_->channels;
  if (!state_->interlaced) {
    std::vector<uint8_t> row(row_bytes);
    // The rows below the window are never decoded.
    return ReadRowsGuarded(window.y1, row.data(), window, out->buffer.get(),
                           out->stride)
               ? absl::OkStatus()
               : Error();
  }
  // Adam7 spreads every row over seven passes: decode all, then crop.
  // Not zero-filled: libpng writes every byte before the crop reads it.
  std::unique_ptr<uint8_t[]> image(new uint8_t[row_bytes * state_->height]);
  std::vector<uint8_t*> rows(state_->height);
  for (int y = 0; y < state_->height; ++y) {
    rows[y] = image.get() + y * row_bytes;
  }
  if (!ReadImageGuarded(rows.data())) return Error();
  for (int y = window.y0; y < window.y1; ++y) {
    CopyColumns(rows[y], state_->channels, window.x0, window.x1,
                out->buffer.get() + (y - window.y0) * out->stride);
  }
  return absl::OkStatus();
}

bool PngDecoder::DecodeAllGuarded(uint8_t* row) {
  png_structp png = state_->png;
  if (setjmp(png_jmpbuf(png))) return false;
  // Interlace handling makes each pass a sweep over every row; one scratch
  // row takes them all, since the pixels are discarded.
  const int passes = state_->interlaced ? 7 : 1;
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < state_->height; ++y) png_read_row(png, row, nullptr);
  }
  // Reads the chunks after the image data up to IEND, checking their CRCs
  // and that the zlib stream ended where it should.
  png_read_end(png, nullptr);
  return true;
}

absl::Status PngDecoder::DecodeAll() {
  std::vector<uint8_t> row(static_cast<size_t>(state_->width) *
                           state_->channels);
  return DecodeAllGuarded(row.data()) ? absl::OkStatus() : Error();
}

}  // namespace stoker::pipeline
