// WebP and TIFF: sniffing, the pixel limit before any decode, windows equal
// to the whole decode cropped, and the FailedPrecondition of a build
// without their library (-DSTOKER_WEBP=OFF -DSTOKER_TIFF=OFF builds those
// tests instead). The images are encoded here by the same libraries;
// tests/python/test_image_formats.py checks the pixels against PIL.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "tests/pipeline/status_matchers.h"
#ifdef STOKER_HAVE_WEBP
#include <webp/encode.h>
#endif
#ifdef STOKER_HAVE_TIFF
#include <tiffio.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#endif

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::HasSubstr;

// A w x h RGB picture whose every pixel differs from its neighbours.
std::vector<uint8_t> Pixels(int w, int h) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) {
    rgb[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  }
  return rgb;
}

// The window's pixels, tightly packed.
std::vector<uint8_t> Packed(const DecodedWindow& d) {
  std::vector<uint8_t> out;
  for (int y = 0; y < d.height; ++y) {
    const uint8_t* row = d.data() + y * d.stride;
    out.insert(out.end(), row, row + d.width * 3);
  }
  return out;
}

// Decodes `window` with a fresh decoder of `bytes`.
std::vector<uint8_t> Window(const std::string& bytes, const PixelWindow& w) {
  DecoderSet decoders;
  absl::StatusOr<ImageDecoder*> d = decoders.Open(bytes);
  EXPECT_THAT(d.status(), IsOk());
  if (!d.ok()) return {};
  DecodedWindow out;
  EXPECT_THAT((*d)->DecodeWindow(8, w, &out), IsOk());
  EXPECT_EQ(out.width, w.width());
  EXPECT_EQ(out.height, w.height());
  return Packed(out);
}

// Columns [x0, x1), rows [y0, y1) of a packed w-wide RGB image.
std::vector<uint8_t> Crop(const std::vector<uint8_t>& rgb, int w,
                          const PixelWindow& c) {
  std::vector<uint8_t> out;
  for (int y = c.y0; y < c.y1; ++y) {
    const uint8_t* row = rgb.data() + (static_cast<size_t>(y) * w + c.x0) * 3;
    out.insert(out.end(), row, row + c.width() * 3);
  }
  return out;
}

TEST(ImageFormatsTest, SniffsEachFormatByItsMagic) {
  EXPECT_EQ(SniffImageFormat(std::string("RIFF\0\0\0\0WEBPVP8 ", 16)),
            ImageFormat::kWebp);
  EXPECT_EQ(SniffImageFormat(std::string("RIFF\0\0\0\0WAVEfmt ", 16)),
            ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat(std::string("II*\0\x08\0\0\0", 8)),
            ImageFormat::kTiff);
  EXPECT_EQ(SniffImageFormat(std::string("MM\0*\0\0\0\x08", 8)),
            ImageFormat::kTiff);
  EXPECT_EQ(SniffImageFormat(std::string("II\0*", 4)), ImageFormat::kUnknown);
  EXPECT_EQ(ImageFormatName(ImageFormat::kWebp), "WebP");
  EXPECT_EQ(ImageFormatName(ImageFormat::kTiff), "TIFF");
  EXPECT_EQ(SniffImageFormat("BM6\0\0\0"), ImageFormat::kUnknown);  // BMP.
}

#ifdef STOKER_HAVE_WEBP

std::string EncodeWebp(int w, int h, bool lossless) {
  const std::vector<uint8_t> rgb = Pixels(w, h);
  uint8_t* out = nullptr;
  const size_t size =
      lossless ? WebPEncodeLosslessRGB(rgb.data(), w, h, w * 3, &out)
               : WebPEncodeRGB(rgb.data(), w, h, w * 3, 90, &out);
  std::string bytes(reinterpret_cast<char*>(out), size);
  WebPFree(out);
  return bytes;
}

TEST(WebpTest, LosslessDecodesToTheEncodedPixels) {
  const std::string webp = EncodeWebp(37, 23, /*lossless=*/true);
  EXPECT_EQ(SniffImageFormat(webp), ImageFormat::kWebp);
  EXPECT_EQ(Window(webp, {0, 0, 37, 23}), Pixels(37, 23));
  EXPECT_THAT(ValidateImage(webp), IsOk());
}

// Odd origins make the decoder ask libwebp for the even one and skip.
TEST(WebpTest, AWindowIsTheWholeDecodeCropped) {
  for (bool lossless : {true, false}) {
    const std::string webp = EncodeWebp(61, 45, lossless);
    const std::vector<uint8_t> whole = Window(webp, {0, 0, 61, 45});
    for (const PixelWindow& w :
         {PixelWindow{1, 1, 60, 44}, PixelWindow{3, 7, 20, 30},
          PixelWindow{16, 16, 32, 32}, PixelWindow{59, 43, 61, 45}}) {
      EXPECT_EQ(Window(webp, w), Crop(whole, 61, w))
          << (lossless ? "lossless" : "lossy") << " window at " << w.x0
          << "," << w.y0;
    }
  }
}

TEST(WebpTest, TruncatedOrOverTheLimitIsDataLossBeforeDecoding) {
  const std::string webp = EncodeWebp(37, 23, /*lossless=*/false);
  EXPECT_THAT(ValidateImage(webp.substr(0, webp.size() / 2)),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("undecodable WebP")));
  DecoderSet small(37 * 23 - 1);
  EXPECT_THAT(small.Open(webp).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("image 37x23 (851 pixels) is over")));
}

#else

TEST(WebpTest, ABuildWithoutLibwebpRefusesWithFailedPrecondition) {
  const std::string webp("RIFF\0\0\0\0WEBPVP8 ", 16);
  const absl::Status want = absl::FailedPreconditionError(
      "a WebP image, but this build has no WebP decoder: install "
      "libwebp-dev and rebuild");
  EXPECT_EQ(FormatBuilt(ImageFormat::kWebp), want);
  EXPECT_EQ(DecoderSet().Open(webp).status(), want);
  EXPECT_EQ(ValidateImage(webp), want);
}

#endif  // STOKER_HAVE_WEBP

#ifdef STOKER_HAVE_TIFF

// A TIFF of Pixels(w, h) written by libtiff into memory (through a
// temporary file: libtiff's client I/O for writing needs seeks we would
// reimplement), optionally with an unassociated alpha of 0 everywhere.
std::string EncodeTiff(int w, int h, bool alpha) {
  char path[] = "/tmp/image_formats_test_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  TIFF* t = TIFFOpen(path, "w");
  const int spp = alpha ? 4 : 3;
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, spp);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_LZW);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 4);
  if (alpha) {
    const uint16_t kind = EXTRASAMPLE_UNASSALPHA;
    TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &kind);
  }
  const std::vector<uint8_t> rgb = Pixels(w, h);
  std::vector<uint8_t> row(static_cast<size_t>(w) * spp);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      std::memcpy(&row[x * spp], &rgb[(static_cast<size_t>(y) * w + x) * 3], 3);
      if (alpha) row[x * spp + 3] = 0;
    }
    EXPECT_EQ(TIFFWriteScanline(t, row.data(), y, 0), 1);
  }
  TIFFClose(t);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::remove(path);
  return bytes;
}

TEST(TiffTest, DecodesToTheEncodedPixelsWholeAndInAWindow) {
  const std::string tiff = EncodeTiff(37, 23, /*alpha=*/false);
  EXPECT_EQ(SniffImageFormat(tiff), ImageFormat::kTiff);
  EXPECT_EQ(Window(tiff, {0, 0, 37, 23}), Pixels(37, 23));
  const PixelWindow w{3, 5, 30, 21};
  EXPECT_EQ(Window(tiff, w), Crop(Pixels(37, 23), 37, w));
  EXPECT_THAT(ValidateImage(tiff), IsOk());
}

// libtiff's RGBA interface would premultiply an unassociated alpha of 0
// into black; PIL's convert("RGB") drops it and keeps the colour.
TEST(TiffTest, AnUnassociatedAlphaIsDroppedNotPremultiplied) {
  const std::string tiff = EncodeTiff(17, 9, /*alpha=*/true);
  EXPECT_EQ(Window(tiff, {0, 0, 17, 9}), Pixels(17, 9));
}

TEST(TiffTest, BadOrTruncatedOrOverTheLimitIsDataLoss) {
  EXPECT_THAT(ValidateImage(std::string("II*\0\xff\0\0\0", 8)),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("undecodable TIFF: cannot read the header")));
  const std::string tiff = EncodeTiff(37, 23, /*alpha=*/false);
  EXPECT_THAT(ValidateImage(tiff.substr(0, tiff.size() / 2)),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("undecodable TIFF")));
  DecoderSet small(37 * 23 - 1);
  EXPECT_THAT(small.Open(tiff).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("image 37x23 (851 pixels) is over")));
}

#else

TEST(TiffTest, ABuildWithoutLibtiffRefusesWithFailedPrecondition) {
  const std::string tiff("II*\0\x08\0\0\0", 8);
  EXPECT_THAT(DecoderSet().Open(tiff).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "a TIFF image, but this build has no TIFF decoder: "
                       "install libtiff-dev and rebuild"));
  EXPECT_THAT(ValidateImage(tiff),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no TIFF decoder")));
}

#endif  // STOKER_HAVE_TIFF

}  // namespace
}  // namespace stoker::pipeline
