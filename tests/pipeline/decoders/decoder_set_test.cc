#include "server/pipeline/decoders/decoder_set.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::MakeJpeg;
using ::stoker::testing::MakePng;
using ::stoker::testing::PngColor;
using ::testing::HasSubstr;

TEST(SniffImageFormatTest, LooksAtTheMagicBytesOnly) {
  EXPECT_EQ(SniffImageFormat(MakeJpeg(9, 9, 1)), ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat(MakePng(9, 9, PngColor::kRgb, 8, false, 1).bytes),
            ImageFormat::kPng);
  EXPECT_EQ(SniffImageFormat(std::string("\xff\xd8\xff", 3)),
            ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat(std::string("\x89PNG\r\n\x1a", 7)),
            ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat("GIF89a"), ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat(""), ImageFormat::kUnknown);
  EXPECT_EQ(ImageFormatName(ImageFormat::kPng), "PNG");
}

TEST(DecoderSetTest, HandsOutTheDecoderOfTheContentsFormat) {
  const std::string jpeg = MakeJpeg(37, 23, 1);
  const std::string png =
      MakePng(41, 19, PngColor::kPalette, 8, false, 2).bytes;
  DecoderSet decoders;
  absl::StatusOr<ImageDecoder*> j = decoders.Open(jpeg);
  absl::StatusOr<ImageDecoder*> p = decoders.Open(png);
  absl::StatusOr<ImageDecoder*> p2 = decoders.Open(png);
  ASSERT_THAT(j.status(), IsOk());
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_THAT(p2.status(), IsOk());
  EXPECT_EQ((*j)->width(), 37);
  EXPECT_TRUE((*j)->scales().has(1));
  EXPECT_EQ((*p)->width(), 41);
  EXPECT_EQ((*p)->height(), 19);
  EXPECT_FALSE((*p)->scales().has(1));
  EXPECT_NE(*p, *p2);  // A second PNG gets its own decoder.
}

TEST(DecoderSetTest, BytesOfNoKnownFormatAreDataLossNamingTheirStart) {
  DecoderSet decoders;
  EXPECT_THAT(decoders.Open("GIF89a\x01\x02").status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "not JPEG, PNG, WebP or TIFF (starts 47 49 46 38)"));
  EXPECT_THAT(
      decoders.Open("BM").status(),
      StatusIs(absl::StatusCode::kDataLoss, "not JPEG, PNG, WebP or TIFF (starts 42 4D)"));
  EXPECT_THAT(
      decoders.Open("").status(),
      StatusIs(absl::StatusCode::kDataLoss, "not JPEG, PNG, WebP or TIFF (no bytes)"));
}

TEST(DecoderSetTest, TheLimitReachesEveryDecoder) {
  DecoderSet decoders(100);
  EXPECT_THAT(decoders.Open(MakeJpeg(11, 10, 1)).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("over limits")));
  EXPECT_THAT(decoders.Open(MakePng(11, 10, PngColor::kRgb, 8, false, 1).bytes)
                  .status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("over limits")));
}

TEST(ValidateImageTest, AcceptsJpegAndPngAndRefusesTheRest) {
  EXPECT_THAT(ValidateImage(MakeJpeg(65, 33, 1)), IsOk());
  EXPECT_THAT(
      ValidateImage(MakePng(65, 33, PngColor::kRgba, 16, true, 1).bytes),
      IsOk());
  EXPECT_THAT(ValidateImage(MakeJpeg(65, 33, 1).substr(0, 300)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("JPEG")));
  EXPECT_THAT(ValidateImage("GIF89a"), StatusIs(absl::StatusCode::kDataLoss,
                                                HasSubstr("not JPEG, PNG, WebP or TIFF")));
}

}  // namespace
}  // namespace stoker::pipeline
