#include "server/pipeline/decoders/png_decoder.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::MakePng;
using ::stoker::testing::PngColor;
using ::stoker::testing::TestPng;
using ::testing::HasSubstr;

// `window` of a decoded PNG, as packed RGB rows.
absl::StatusOr<std::vector<uint8_t>> Decode(const std::string& png,
                                            const PixelWindow& window) {
  PngDecoder decoder;
  if (absl::Status s = decoder.ReadHeader(png); !s.ok()) return s;
  DecodedWindow out;
  if (absl::Status s = decoder.DecodeWindow(8, window, &out); !s.ok()) {
    return s;
  }
  EXPECT_EQ(out.width, window.width());
  EXPECT_EQ(out.height, window.height());
  EXPECT_EQ(out.channels, 3);
  std::vector<uint8_t> rgb(static_cast<size_t>(out.width) * out.height * 3);
  for (int y = 0; y < out.height; ++y) {
    std::memcpy(&rgb[static_cast<size_t>(y) * out.width * 3],
                out.data() + y * out.stride, out.width * 3);
  }
  return rgb;
}

// The same crop of a packed width-wide RGB image.
std::vector<uint8_t> Crop(const std::vector<uint8_t>& rgb, int width,
                          const PixelWindow& w) {
  std::vector<uint8_t> out;
  for (int y = w.y0; y < w.y1; ++y) {
    const auto row = rgb.begin() + (static_cast<size_t>(y) * width + w.x0) * 3;
    out.insert(out.end(), row, row + w.width() * 3);
  }
  return out;
}

struct Case {
  PngColor color;
  int depth;
  const char* name;
};

const Case kCases[] = {
    {PngColor::kGray, 1, "gray1"},      {PngColor::kGray, 2, "gray2"},
    {PngColor::kGray, 4, "gray4"},      {PngColor::kGray, 8, "gray8"},
    {PngColor::kGray, 16, "gray16"},    {PngColor::kGrayAlpha, 8, "la8"},
    {PngColor::kGrayAlpha, 16, "la16"}, {PngColor::kRgb, 8, "rgb8"},
    {PngColor::kRgb, 16, "rgb16"},      {PngColor::kRgba, 8, "rgba8"},
    {PngColor::kRgba, 16, "rgba16"},    {PngColor::kPalette, 1, "p1"},
    {PngColor::kPalette, 4, "p4"},      {PngColor::kPalette, 8, "p8"},
};

TEST(PngDecoderTest, EveryColourTypeBecomesRgbByPilsRules) {
  for (const Case& c : kCases) {
    for (bool interlaced : {false, true}) {
      const TestPng png = MakePng(37, 23, c.color, c.depth, interlaced, 5);
      PngDecoder decoder;
      ASSERT_THAT(decoder.ReadHeader(png.bytes), IsOk()) << c.name;
      EXPECT_EQ(decoder.width(), 37);
      EXPECT_EQ(decoder.height(), 23);
      EXPECT_EQ(decoder.interlaced(), interlaced);
      const auto rgb = Decode(png.bytes, {0, 0, 37, 23});
      ASSERT_THAT(rgb.status(), IsOk()) << c.name;
      EXPECT_TRUE(*rgb == png.rgb) << c.name << " interlaced " << interlaced;
    }
  }
}

TEST(PngDecoderTest, WindowEqualsTheSamePixelsOfAFullDecode) {
  const PixelWindow windows[] = {
      {0, 0, 61, 40},  {0, 0, 1, 1},    {60, 39, 61, 40}, {5, 7, 33, 21},
      {13, 0, 14, 40}, {0, 22, 61, 23}, {20, 30, 61, 40}};
  for (const Case& c : kCases) {
    for (bool interlaced : {false, true}) {
      const TestPng png = MakePng(61, 40, c.color, c.depth, interlaced, 9);
      for (const PixelWindow& w : windows) {
        const auto rgb = Decode(png.bytes, w);
        ASSERT_THAT(rgb.status(), IsOk()) << c.name;
        EXPECT_TRUE(*rgb == Crop(png.rgb, 61, w))
            << c.name << " interlaced " << interlaced << " window [" << w.x0
            << "," << w.x1 << ")x[" << w.y0 << "," << w.y1 << ")";
      }
    }
  }
}

TEST(PngDecoderTest, AWindowStopsBeforeCorruptRowsBelowIt) {
  // Truncated near the end: rows at the top still decode, the whole image
  // (and validation) does not.
  const TestPng png = MakePng(64, 64, PngColor::kRgb, 8, false, 3);
  const std::string cut = png.bytes.substr(0, png.bytes.size() * 3 / 4);
  EXPECT_THAT(Decode(cut, {0, 0, 64, 4}).status(), IsOk());
  EXPECT_THAT(
      Decode(cut, {0, 0, 64, 64}).status(),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("undecodable PNG")));
  EXPECT_THAT(ValidateImage(cut), StatusIs(absl::StatusCode::kDataLoss,
                                           HasSubstr("undecodable PNG")));
  EXPECT_THAT(ValidateImage(png.bytes), IsOk());
}

TEST(PngDecoderTest, ValidateFindsEveryTruncationAndACorruptCrc) {
  const TestPng png = MakePng(40, 30, PngColor::kPalette, 8, true, 4);
  for (size_t keep = 0; keep < png.bytes.size(); keep += 7) {
    EXPECT_THAT(ValidateImage(png.bytes.substr(0, keep)),
                StatusIs(absl::StatusCode::kDataLoss, ::testing::_))
        << keep;
  }
  // A flipped bit in the last IDAT's CRC (the 4 bytes before the 12 of
  // IEND), and one in its zlib stream's Adler-32 just before.
  std::string bad_crc = png.bytes;
  bad_crc[bad_crc.size() - 14] ^= 0x10;
  EXPECT_THAT(ValidateImage(bad_crc),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC")));
  std::string bad_adler = png.bytes;
  bad_adler[bad_adler.size() - 18] ^= 0x10;
  EXPECT_THAT(ValidateImage(bad_adler), StatusIs(absl::StatusCode::kDataLoss,
                                                 HasSubstr("undecodable PNG")));
}

TEST(PngDecoderTest, RefusesAnImageOverItsPixelLimitFromTheHeader) {
  const TestPng png = MakePng(30, 20, PngColor::kRgb, 8, false, 1);
  PngDecoder small(30 * 20 - 1);
  EXPECT_THAT(small.ReadHeader(png.bytes),
              StatusIs(absl::StatusCode::kDataLoss,
                       "image 30x20 (600 pixels) is over "
                       "limits.max_decode_pixels (599)"));
  PngDecoder exact(30 * 20);
  EXPECT_THAT(exact.ReadHeader(png.bytes), IsOk());
}

TEST(PngDecoderTest, WindowOutsideTheImageOrAScaleBelow8IsAnInternalError) {
  const TestPng png = MakePng(30, 20, PngColor::kRgb, 8, false, 1);
  for (const auto& [scale, w] : {std::pair{8, PixelWindow{0, 0, 31, 20}},
                                 std::pair{8, PixelWindow{0, 5, 30, 5}},
                                 std::pair{4, PixelWindow{0, 0, 15, 10}}}) {
    PngDecoder decoder;
    ASSERT_THAT(decoder.ReadHeader(png.bytes), IsOk());
    DecodedWindow out;
    EXPECT_THAT(decoder.DecodeWindow(scale, w, &out),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("PNG window")));
  }
  PngDecoder decoder;
  ASSERT_THAT(decoder.ReadHeader(png.bytes), IsOk());
  EXPECT_TRUE(decoder.scales().has(8));
  EXPECT_FALSE(decoder.scales().has(4));
}

TEST(PngDecoderTest, JunkAfterTheSignatureIsDataLoss) {
  PngDecoder decoder;
  EXPECT_THAT(
      decoder.ReadHeader(::stoker::testing::MakePngLookalike()),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("undecodable PNG")));
}

}  // namespace
}  // namespace stoker::pipeline
