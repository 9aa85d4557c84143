#include "server/pipeline/pixel_convert.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tensor/float16.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::pipeline {
namespace {

using ::stoker::tensor::DType;

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A 3 x 2 RGB image (width 3, height 2) in rows 12 bytes apart, the last
// 3 bytes of each row being padding that must not be read.
constexpr int kWidth = 3, kHeight = 2;
constexpr size_t kStride = 12;
const uint8_t kPixels[kHeight * kStride] = {
    0,   10,  20, 30, 40, 50, 60,  70,  80, 99, 99, 99,  //
    255, 128, 1,  2,  3,  4,  200, 100, 50, 99, 99, 99,
};

uint8_t Pixel(int y, int x, int c) { return kPixels[y * kStride + 3 * x + c]; }

OutputFormat Normalized(DType dtype, Layout layout) {
  OutputFormat format;
  format.dtype = dtype;
  format.layout = layout;
  format.mean = {0.485, 0.456, 0.406};
  format.std = {0.229, 0.224, 0.225};
  return format;
}

// Index of (y, x, c) in a tensor of `layout`.
size_t Index(Layout layout, int y, int x, int c) {
  return layout == Layout::kHwc ? (y * kWidth + x) * 3 + c
                                : (c * kHeight + y) * kWidth + x;
}

TEST(PixelConverterTest, Float32MatchesTorchvisionNormalizeExactly) {
  for (Layout layout : {Layout::kHwc, Layout::kChw}) {
    for (bool flip : {false, true}) {
      const OutputFormat format = Normalized(DType::kFloat32, layout);
      std::vector<float> out(kWidth * kHeight * 3, -1000.0f);
      PixelConverter(format).Convert(kPixels, kStride, kWidth, kHeight, flip,
                                     reinterpret_cast<uint8_t*>(out.data()));
      for (int y = 0; y < kHeight; ++y) {
        for (int x = 0; x < kWidth; ++x) {
          for (int c = 0; c < 3; ++c) {
            const int sx = flip ? kWidth - 1 - x : x;
            const float want = static_cast<float>(
                (Pixel(y, sx, c) / 255.0 - format.mean[c]) / format.std[c]);
            ASSERT_EQ(out[Index(layout, y, x, c)], want)
                << "y=" << y << " x=" << x << " c=" << c << " flip=" << flip;
          }
        }
      }
    }
  }
}

TEST(PixelConverterTest, Float16HoldsTheRoundedNormalizedValue) {
  const OutputFormat format = Normalized(DType::kFloat16, Layout::kChw);
  std::vector<uint16_t> out(kWidth * kHeight * 3);
  PixelConverter(format).Convert(kPixels, kStride, kWidth, kHeight, false,
                                 reinterpret_cast<uint8_t*>(out.data()));
  // (255 / 255 - 0.485) / 0.229 = 2.24891; the nearest half is 2.24805,
  // 0x407F. (0 / 255 - 0.485) / 0.229 = -2.11790; the nearest is -2.11719,
  // 0xC03C. (Both from Python's struct.pack('<e', v).)
  EXPECT_EQ(out[Index(Layout::kChw, 1, 0, 0)], 0x407F);
  EXPECT_EQ(out[Index(Layout::kChw, 0, 0, 0)], 0xC03C);
  for (int y = 0; y < kHeight; ++y) {
    for (int x = 0; x < kWidth; ++x) {
      for (int c = 0; c < 3; ++c) {
        const double v =
            (Pixel(y, x, c) / 255.0 - format.mean[c]) / format.std[c];
        ASSERT_EQ(out[Index(Layout::kChw, y, x, c)],
                  tensor::FloatToHalf(static_cast<float>(v)));
      }
    }
  }
}

TEST(PixelConverterTest, Uint8PassesPixelsThroughInEitherLayout) {
  OutputFormat format;
  PixelConverter hwc(format);
  EXPECT_TRUE(hwc.is_passthrough());
  std::vector<uint8_t> out(kWidth * kHeight * 3);
  hwc.Convert(kPixels, kStride, kWidth, kHeight, false, out.data());
  EXPECT_THAT(out, ElementsAre(0, 10, 20, 30, 40, 50, 60, 70, 80,  //
                               255, 128, 1, 2, 3, 4, 200, 100, 50));
  hwc.Convert(kPixels, kStride, kWidth, kHeight, true, out.data());
  EXPECT_THAT(out, ElementsAre(60, 70, 80, 30, 40, 50, 0, 10, 20,  //
                               200, 100, 50, 2, 3, 4, 255, 128, 1));
  format.layout = Layout::kChw;
  PixelConverter(format).Convert(kPixels, kStride, kWidth, kHeight, false,
                                 out.data());
  EXPECT_THAT(out, ElementsAre(0, 30, 60, 255, 2, 200,   // R
                               10, 40, 70, 128, 3, 100,  // G
                               20, 50, 80, 1, 4, 50));   // B
}

TEST(PixelConverterTest, FloatWithoutMeanOrStdIsToTensor) {
  OutputFormat format;
  format.dtype = DType::kFloat32;
  std::vector<float> out(kWidth * kHeight * 3);
  PixelConverter(format).Convert(kPixels, kStride, kWidth, kHeight, false,
                                 reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[9], 1.0f);
  EXPECT_EQ(out[10], static_cast<float>(128 / 255.0));
}

TEST(PixelConverterTest, CheckRejectsFormatsItCannotWrite) {
  OutputFormat format;
  EXPECT_THAT(PixelConverter::Check(format), IsOk());
  format.dtype = DType::kInt64;
  EXPECT_THAT(PixelConverter::Check(format),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("int64")));
  format.dtype = DType::kUint8;
  format.mean[0] = 0.5;
  EXPECT_THAT(PixelConverter::Check(format),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uint8")));
  format.dtype = DType::kFloat32;
  EXPECT_THAT(PixelConverter::Check(format), IsOk());
  format.std[2] = -1;
  EXPECT_THAT(
      PixelConverter::Check(format),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("std[2]")));
  format.std[2] = std::numeric_limits<double>::infinity();
  EXPECT_THAT(
      PixelConverter::Check(format),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("std[2]")));
}

TEST(ImageShapeTest, FollowsTheLayout) {
  OutputFormat format;
  EXPECT_THAT(ImageShape(format, 224, 160), ElementsAre(224, 160, 3));
  format.layout = Layout::kChw;
  EXPECT_THAT(ImageShape(format, 224, 160), ElementsAre(3, 224, 160));
}

}  // namespace
}  // namespace stoker::pipeline
