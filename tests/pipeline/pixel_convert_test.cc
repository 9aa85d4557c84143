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

// Every byte value in every channel, at widths that leave the eight-pixel
// path a remainder of 0, 3 and 7 columns, in rows with padding: the
// vectorized CHW path and its tails give exactly the tables' values.
TEST(PixelConverterTest, WideRowsEqualTheNormalizedValueEverywhere) {
  const std::vector<OutputFormat> formats = {
      Normalized(DType::kFloat32, Layout::kChw),
      Normalized(DType::kFloat16, Layout::kChw),
      Normalized(DType::kFloat32, Layout::kHwc),
      [] {  // Odd means and stds, as a user's dataset statistics are.
        OutputFormat f = Normalized(DType::kFloat32, Layout::kChw);
        f.mean = {0.5071, 0.4865, 0.4409};
        f.std = {0.2673, 0.2564, 0.2762};
        return f;
      }(),
  };
  for (const OutputFormat& format : formats) {
    const PixelConverter converter(format);
    for (int width : {256, 35, 15}) {
      const int height = 3 * 256 / width + 1;
      const size_t stride = 3 * width + 5;
      std::vector<uint8_t> src(stride * height);
      for (size_t i = 0; i < src.size(); ++i) src[i] = (i * 7 + i / 3) % 256;
      for (bool flip : {false, true}) {
        const size_t elements = 3 * static_cast<size_t>(width) * height;
        const size_t size = format.dtype == DType::kFloat32 ? 4 : 2;
        std::vector<uint8_t> out(elements * size);
        converter.Convert(src.data(), stride, width, height, flip, out.data());
        for (int y = 0; y < height; ++y) {
          for (int x = 0; x < width; ++x) {
            for (int c = 0; c < 3; ++c) {
              const int sx = flip ? width - 1 - x : x;
              const float want = static_cast<float>(
                  (src[y * stride + 3 * sx + c] / 255.0 - format.mean[c]) /
                  format.std[c]);
              const size_t at =
                  format.layout == Layout::kHwc
                      ? (static_cast<size_t>(y) * width + x) * 3 + c
                      : (static_cast<size_t>(c) * height + y) * width + x;
              if (size == 4) {
                float got;
                std::memcpy(&got, &out[at * 4], 4);
                ASSERT_EQ(got, want) << "width " << width << " y=" << y
                                     << " x=" << x << " c=" << c;
              } else {
                uint16_t got;
                std::memcpy(&got, &out[at * 2], 2);
                ASSERT_EQ(got, tensor::FloatToHalf(want))
                    << "width " << width << " y=" << y << " x=" << x;
              }
            }
          }
        }
      }
    }
  }
}

// The vector path is what makes the float output cheap (docs/performance.md);
// it must not quietly fall back to the tables for the usual statistics.
TEST(PixelConverterTest, ImageNetFloatChwTakesTheVectorPathOnAvx2) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!PixelConverter::CpuCanVectorize()) {
    GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  }
  EXPECT_TRUE(
      PixelConverter(Normalized(DType::kFloat32, Layout::kChw)).vectorized());
  EXPECT_TRUE(
      PixelConverter(Normalized(DType::kFloat16, Layout::kChw)).vectorized());
  OutputFormat to_tensor;
  to_tensor.dtype = DType::kFloat32;
  to_tensor.layout = Layout::kChw;
  EXPECT_TRUE(PixelConverter(to_tensor).vectorized());
  EXPECT_FALSE(
      PixelConverter(Normalized(DType::kFloat32, Layout::kHwc)).vectorized());
#else
  GTEST_SKIP() << "the vector path is for x86-64";
#endif
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
