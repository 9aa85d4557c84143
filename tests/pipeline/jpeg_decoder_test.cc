#include "server/pipeline/jpeg_decoder.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/reference_decode.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::EncodeRgb;
using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::MakeProgressive;
using ::stoker::pipeline::testing::RgbImage;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::pipeline::testing::TurboDecode;
using ::stoker::testing::ColorKind;
using ::stoker::testing::MakeJpeg;
using ::stoker::testing::MakePngLookalike;
using ::testing::HasSubstr;

TEST(JpegDecoderTest, ReadsTheImageSizeFromTheHeader) {
  const std::string jpeg = MakeJpeg(37, 23, 1);
  JpegDecoder decoder;
  ASSERT_THAT(decoder.ReadHeader(jpeg), IsOk());
  EXPECT_EQ(decoder.width(), 37);
  EXPECT_EQ(decoder.height(), 23);
}

TEST(JpegDecoderTest, RefusesAnImageOverItsPixelLimitFromTheHeader) {
  const std::string jpeg = MakeProgressive(MakeJpeg(300, 200, 1));
  JpegDecoder small(300 * 200 - 1);
  EXPECT_THAT(small.ReadHeader(jpeg),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("image 300x200 (60000 pixels) is over "
                                 "limits.max_decode_pixels (59999)")));
  JpegDecoder exact(300 * 200);
  EXPECT_THAT(exact.ReadHeader(jpeg), IsOk());
  // The default admits 8000x8000 but not 8192x8192.
  EXPECT_GE(kDefaultMaxDecodePixels, int64_t{8000} * 8000);
  EXPECT_LT(kDefaultMaxDecodePixels, int64_t{8192} * 8192);
}

TEST(JpegDecoderTest, ScaledSizeRoundsUpLikeLibjpeg) {
  EXPECT_EQ(JpegDecoder::ScaledSize(37, 8), 37);
  EXPECT_EQ(JpegDecoder::ScaledSize(37, 1), 5);
  EXPECT_EQ(JpegDecoder::ScaledSize(37, 3), 14);
  EXPECT_EQ(JpegDecoder::ScaledSize(1, 1), 1);
}

TEST(JpegDecoderTest, PngNamedJpgIsDataLossThatSaysPng) {
  const std::string png = MakePngLookalike();
  JpegDecoder decoder;
  EXPECT_THAT(decoder.ReadHeader(png), StatusIs(absl::StatusCode::kDataLoss,
                                                HasSubstr("looks like PNG")));
  EXPECT_THAT(ValidateJpeg(png), StatusIs(absl::StatusCode::kDataLoss,
                                          HasSubstr("undecodable JPEG")));
}

TEST(JpegDecoderTest, EmptyAndGarbageInputsAreDataLoss) {
  EXPECT_THAT(ValidateJpeg(""),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("no bytes")));
  EXPECT_THAT(ValidateJpeg(std::string(1000, 'x')),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("JPEG")));
  // A JPEG start-of-image marker followed by nothing useful.
  EXPECT_THAT(ValidateJpeg(std::string("\xff\xd8\xff", 3)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("JPEG")));
}

TEST(JpegDecoderTest, TruncatedJpegIsDataLossWhenValidated) {
  const std::string jpeg = MakeJpeg(320, 240, 4);
  for (size_t keep : {jpeg.size() / 2, jpeg.size() - 2}) {
    EXPECT_THAT(ValidateJpeg(jpeg.substr(0, keep)),
                StatusIs(absl::StatusCode::kDataLoss,
                         HasSubstr("Premature end of JPEG file")))
        << "kept " << keep << " of " << jpeg.size() << " bytes";
  }
}

TEST(JpegDecoderTest, TruncationInsideTheWindowIsDataLoss) {
  const std::string jpeg = MakeJpeg(320, 240, 4);
  const std::string truncated = jpeg.substr(0, jpeg.size() / 2);
  JpegDecoder decoder;
  ASSERT_THAT(decoder.ReadHeader(truncated), IsOk());
  DecodedWindow window;
  EXPECT_THAT(decoder.DecodeWindow(8, {0, 0, 320, 240}, &window),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("Premature")));
}

TEST(JpegDecoderTest, HeaderOverThePixelLimitIsDataLoss) {
  std::string jpeg = MakeJpeg(16, 16, 1);
  // Rewrite the baseline frame header (FF C0, length, precision, height,
  // width) to claim 20000 x 20000.
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) {
    jpeg[at] = static_cast<char>(20000 >> 8);
    jpeg[at + 1] = static_cast<char>(20000 & 0xff);
  }
  JpegDecoder decoder;
  EXPECT_THAT(decoder.ReadHeader(jpeg),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("image 20000x20000 (400000000 pixels) is "
                                 "over limits.max_decode_pixels")));
}

TEST(JpegDecoderTest, ValidateAcceptsRgbGrayAndCmyk) {
  EXPECT_THAT(ValidateJpeg(MakeJpeg(65, 33, 1)), IsOk());
  EXPECT_THAT(ValidateJpeg(MakeJpeg(65, 33, 2, 80, ColorKind::kGray)), IsOk());
  EXPECT_THAT(ValidateJpeg(MakeJpeg(65, 33, 3, 95, ColorKind::kCmyk)), IsOk());
}

TEST(JpegDecoderTest, WindowOutsideTheScaledImageIsAnInternalError) {
  const std::string jpeg = MakeJpeg(64, 64, 1);
  JpegDecoder decoder;
  ASSERT_THAT(decoder.ReadHeader(jpeg), IsOk());
  DecodedWindow window;
  // At scale 1/8 the image is 8 x 8.
  EXPECT_THAT(decoder.DecodeWindow(1, {0, 0, 9, 8}, &window),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("outside")));
}

// The fused path's decode step pinned to a plain one: any window, at any
// DCT scale, must hold exactly the pixels of a whole-image decode by
// TurboJPEG at that scale, for every subsampling and colour space.
TEST(JpegDecoderTest, WindowEqualsTheSamePixelsOfAFullDecodeAtEveryScale) {
  const std::string rgb420 = MakeJpeg(100, 60, 9);
  const struct {
    const char* name;
    std::string jpeg;
  } images[] = {
      {"4:2:0", rgb420},
      {"4:2:2", EncodeRgb(101, 67, 2, TJSAMP_422)},
      {"4:4:4", EncodeRgb(90, 50, 3, TJSAMP_444)},
      {"4:1:1", EncodeRgb(130, 41, 4, TJSAMP_411)},
      {"gray", MakeJpeg(77, 45, 5, 90, ColorKind::kGray)},
      {"cmyk", MakeJpeg(64, 48, 6, 95, ColorKind::kCmyk)},
      {"progressive", MakeProgressive(rgb420)},
  };
  for (const auto& image : images) {
    for (int scale = 1; scale <= 8; ++scale) {
      const RgbImage full = TurboDecode(image.jpeg, scale);
      const int w = full.width, h = full.height;
      const PixelWindow windows[] = {
          {0, 0, w, h},
          {w / 3, h / 4, w - w / 5, h - h / 6},
          {std::min(16, w - 1), std::min(8, h - 1), w, h},
          {0, 0, 1, 1},
          {w - 1, h - 1, w, h},
      };
      for (const PixelWindow& window : windows) {
        SCOPED_TRACE(::testing::Message()
                     << image.name << " at " << scale << "/8, window ["
                     << window.x0 << "," << window.x1 << ")x[" << window.y0
                     << "," << window.y1 << ")");
        JpegDecoder decoder;
        ASSERT_THAT(decoder.ReadHeader(image.jpeg), IsOk());
        ASSERT_EQ(JpegDecoder::ScaledSize(decoder.width(), scale), w);
        DecodedWindow decoded;
        ASSERT_THAT(decoder.DecodeWindow(scale, window, &decoded), IsOk());
        ASSERT_EQ(decoded.width, window.width());
        ASSERT_EQ(decoded.height, window.height());
        int mismatches = 0;
        for (int y = 0; y < decoded.height; ++y) {
          const uint8_t* row = decoded.data() + y * decoded.stride;
          const uint8_t* want = full.at(window.y0 + y, window.x0);
          mismatches += std::memcmp(row, want, 3 * decoded.width) != 0;
        }
        EXPECT_EQ(mismatches, 0) << "rows differ";
      }
    }
  }
}

}  // namespace
}  // namespace stoker::pipeline
