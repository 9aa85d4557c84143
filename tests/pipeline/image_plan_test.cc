// Pins the fused decode (window + DCT scale + resize) to a plain path: full
// decode with TurboJPEG, crop of the same source rectangle, cv::resize.
//
// Tolerance. The decode step alone is pinned exactly (jpeg_decoder_test);
// what differs here is legitimate: the DCT downscale averages 8/M pixels
// per block where INTER_AREA averages full-size pixels on another grid; the
// window's edges are placed to the nearest scaled pixel (at most half an
// output pixel off); below a 2x shrink the fused path resizes with
// INTER_LINEAR where the reference uses INTER_AREA; and an axis that
// shrinks 2x or more is box-averaged by a whole factor before the linear
// resize (the box views differ from the reference by a mean of at most
// 0.35). MakePixels' pictures
// wrap their gradients modulo 256, so they have edges of up to 255 levels
// where a sub-pixel difference in filtering shows in full: a handful of
// pixels differ by up to ~125. The bounds are therefore on the mean
// (measured worst 2.95) and the 99.5th percentile (measured worst 43) of
// the absolute differences. A window misplaced by one block (8 source
// pixels) gives a mean of 6.7 and a 99.5th percentile of 108
// (CatchesAWindowOffByOneBlock).

#include "server/pipeline/image_plan.h"

#include <turbojpeg.h>

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/jpeg_decoder.h"
#include "server/pipeline/pixel_convert.h"
#include "tests/pipeline/reference_decode.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::EncodeRgb;
using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::MakeProgressive;
using ::stoker::pipeline::testing::RgbImage;
using ::stoker::pipeline::testing::TurboDecode;
using ::stoker::testing::ColorKind;
using ::stoker::testing::MakeJpeg;

constexpr double kMaxMean = 3.5;
constexpr int kMaxP995 = 48;

// The plain path, step 1: the whole image at full size.
cv::Mat FullDecode(const std::string& jpeg) {
  const RgbImage image = TurboDecode(jpeg);
  cv::Mat rgb(image.height, image.width, CV_8UC3);
  std::copy(image.pixels.begin(), image.pixels.end(), rgb.data);
  return rgb;
}

// The plain path, step 2: crop the view's (whole-pixel) rectangle, resize
// it with the textbook filter (area on an axis that shrinks, linear on one
// that grows), flip.
cv::Mat Reference(const cv::Mat& full, const View& view) {
  const cv::Rect rect(static_cast<int>(view.x), static_cast<int>(view.y),
                      static_cast<int>(view.width),
                      static_cast<int>(view.height));
  const cv::Mat crop = full(rect);
  const cv::Size size(view.out_width, view.out_height);
  cv::Mat out;
  if (crop.size() == size) {
    crop.copyTo(out);
  } else if (crop.cols > size.width && crop.rows > size.height) {
    cv::resize(crop, out, size, 0, 0, cv::INTER_AREA);
  } else {
    // One axis at most shrinks: area on that axis alone, then linear.
    out = crop;
    if (out.cols > size.width) {
      cv::resize(out, out, cv::Size(size.width, out.rows), 0, 0,
                 cv::INTER_AREA);
    }
    if (out.rows > size.height) {
      cv::resize(out, out, cv::Size(out.cols, size.height), 0, 0,
                 cv::INTER_AREA);
    }
    if (out.size() != size) {
      cv::resize(out, out, size, 0, 0, cv::INTER_LINEAR);
    }
  }
  if (view.flip) cv::flip(out, out, 1);
  return out;
}

// The fast path, writing uint8 HWC into a fresh buffer.
cv::Mat Fused(const std::string& jpeg, const View& view) {
  JpegDecoder decoder;
  EXPECT_THAT(decoder.ReadHeader(jpeg), IsOk());
  cv::Mat out(view.out_height, view.out_width, CV_8UC3, cv::Scalar::all(7));
  EXPECT_THAT(RenderImage(view, PixelConverter(OutputFormat()), &decoder,
                          out.data, nullptr),
              IsOk());
  return out;
}

struct Difference {
  double mean = 0;
  int p995 = 0;  // 99.5th percentile of the absolute differences.
  int max = 0;
};

Difference Compare(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat diff;
  cv::absdiff(a, b, diff);
  // absdiff allocates `diff`, so its bytes are contiguous.
  std::vector<uint8_t> values(diff.data,
                              diff.data + diff.total() * diff.elemSize());
  std::sort(values.begin(), values.end());
  Difference d;
  double sum = 0;
  for (uint8_t v : values) sum += v;
  d.mean = sum / values.size();
  d.p995 = values[values.size() * 995 / 1000];
  d.max = values.back();
  return d;
}

View MakeView(int x, int y, int w, int h, int out_w, int out_h,
              bool flip = false) {
  View view;
  view.x = x;
  view.y = y;
  view.width = w;
  view.height = h;
  view.out_width = out_w;
  view.out_height = out_h;
  view.flip = flip;
  return view;
}

struct Image {
  std::string name;
  std::string jpeg;
};

std::vector<Image> TestImages() {
  const std::string rgb = MakeJpeg(640, 480, 1);
  return {
      {"rgb 640x480 4:2:0", rgb},
      {"rgb 517x389 4:2:0", MakeJpeg(517, 389, 2)},
      {"rgb 400x300 4:4:4", EncodeRgb(400, 300, 3, TJSAMP_444)},
      {"rgb 401x299 4:2:2", EncodeRgb(401, 299, 4, TJSAMP_422)},
      {"gray 333x251", MakeJpeg(333, 251, 5, 90, ColorKind::kGray)},
      {"cmyk 300x200", MakeJpeg(300, 200, 6, 95, ColorKind::kCmyk)},
      {"progressive 640x480", MakeProgressive(rgb)},
  };
}

// Views in which every rectangle fits the smallest test image (300 x 200),
// covering each DCT scale and both filters.
std::vector<View> TestViews() {
  return {
      MakeView(0, 0, 300, 200, 224, 160),          // Whole-ish, scale 8.
      MakeView(37, 21, 250, 170, 64, 48),          // Scale 4.
      MakeView(7, 5, 290, 190, 60, 40),            // Scale 2.
      MakeView(100, 50, 160, 120, 160, 120),       // Same size, scale 8.
      MakeView(13, 9, 200, 150, 20, 15),           // Tiny output, scale 1.
      MakeView(10, 10, 50, 40, 224, 224),          // Upscale.
      MakeView(51, 33, 180, 130, 100, 100, true),  // Flipped, scale 8.
      MakeView(150, 100, 150, 100, 75, 50),        // Touches right/bottom.
      MakeView(3, 77, 297, 61, 99, 30),            // Wide, odd offsets.
      MakeView(0, 20, 300, 120, 100, 100),         // Box 3:1 across.
      MakeView(20, 0, 60, 200, 50, 50, true),      // Box 1:4 down, flipped.
      MakeView(0, 80, 300, 40, 100, 100),          // Box 3:1, upscale down.
      MakeView(0, 0, 300, 200, 1, 1),              // Past the box limit.
  };
}

TEST(RenderImageTest, FusedDecodeMatchesFullDecodeCropResize) {
  for (const Image& image : TestImages()) {
    const cv::Mat full = FullDecode(image.jpeg);
    for (const View& view : TestViews()) {
      const RenderPlan plan = PlanRender(full.cols, full.rows, view);
      const Difference d =
          Compare(Fused(image.jpeg, view), Reference(full, view));
      SCOPED_TRACE(::testing::Message()
                   << image.name << ", rect " << view.x << "," << view.y << " "
                   << view.width << "x" << view.height << " -> "
                   << view.out_width << "x" << view.out_height
                   << (view.flip ? " flipped" : "") << ", scale " << plan.scale
                   << "/8: mean " << d.mean << ", p99.5 " << d.p995 << ", max "
                   << d.max);
      EXPECT_LT(d.mean, kMaxMean);
      EXPECT_LE(d.p995, kMaxP995);
    }
  }
}

// interpolation: bicubic changes only the last step to the output size. An
// upscaled whole-pixel rectangle is decoded at full size and not reduced,
// so its render is exactly OpenCV's bicubic resize of the full decode's
// crop, which the bilinear render is not. A shrinking view stays near the
// textbook (area) reference, a little further than bilinear: the cubic
// kernel's negative lobes sharpen the test images' hard edges (measured
// worst: mean 3.80, p99.5 57, both on different views).
constexpr double kMaxMeanBicubic = 4.0;
constexpr int kMaxP995Bicubic = 60;
TEST(RenderImageTest, BicubicIsOpenCvsCubicKernelOnTheLastStep) {
  for (const Image& image : TestImages()) {
    SCOPED_TRACE(image.name);
    const cv::Mat full = FullDecode(image.jpeg);
    View view = MakeView(10, 6, 60, 40, 150, 100);
    view.interpolation = Interpolation::kBicubic;
    cv::Mat cubic;
    cv::resize(full(cv::Rect(10, 6, 60, 40)), cubic, cv::Size(150, 100), 0, 0,
               cv::INTER_CUBIC);
    EXPECT_EQ(Compare(Fused(image.jpeg, view), cubic).max, 0);
    View bilinear = view;
    bilinear.interpolation = Interpolation::kBilinear;
    EXPECT_GT(Compare(Fused(image.jpeg, bilinear), cubic).mean, 0.1);

    for (View shrink : TestViews()) {
      shrink.interpolation = Interpolation::kBicubic;
      const Difference d =
          Compare(Fused(image.jpeg, shrink), Reference(full, shrink));
      SCOPED_TRACE(::testing::Message()
                   << shrink.width << "x" << shrink.height << " -> "
                   << shrink.out_width << "x" << shrink.out_height << ": mean "
                   << d.mean << ", p99.5 " << d.p995);
      EXPECT_LT(d.mean, kMaxMeanBicubic);
      EXPECT_LE(d.p995, kMaxP995Bicubic);
    }
  }
}

// The other fast path: decode, resize into a scratch image, then normalize
// into float32 CHW (what the train and val pipelines write). It must be the
// uint8 render above, pinned to the reference, followed by exactly the
// normalization torchvision does, flipped views and padding included.
TEST(RenderImageTest, NormalizedChwIsTheUint8RenderNormalized) {
  OutputFormat format;
  format.dtype = tensor::DType::kFloat32;
  format.layout = Layout::kChw;
  format.mean = {0.485, 0.456, 0.406};
  format.std = {0.229, 0.224, 0.225};
  std::vector<View> views = TestViews();
  views.push_back(MakeView(-20, -10, 340, 220, 170, 110, true));  // Padded.
  for (const Image& image : TestImages()) {
    for (const View& view : views) {
      SCOPED_TRACE(::testing::Message()
                   << image.name << ", rect " << view.x << "," << view.y << " "
                   << view.width << "x" << view.height << " -> "
                   << view.out_width << "x" << view.out_height
                   << (view.flip ? " flipped" : ""));
      const cv::Mat u8 = Fused(image.jpeg, view);
      JpegDecoder decoder;
      ASSERT_THAT(decoder.ReadHeader(image.jpeg), IsOk());
      const int w = view.out_width, h = view.out_height;
      std::vector<float> out(static_cast<size_t>(w) * h * 3, -1000.0f);
      ASSERT_THAT(RenderImage(view, PixelConverter(format), &decoder,
                              reinterpret_cast<uint8_t*>(out.data()), nullptr),
                  IsOk());
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          for (int c = 0; c < 3; ++c) {
            const float want = static_cast<float>(
                (u8.at<cv::Vec3b>(y, x)[c] / 255.0 - format.mean[c]) /
                format.std[c]);
            ASSERT_EQ(out[(static_cast<size_t>(c) * h + y) * w + x], want)
                << "y=" << y << " x=" << x << " c=" << c;
          }
        }
      }
    }
  }
}

// Columns alternating black and white, shrunk 2x across only (the DCT
// scale has to stay at 8/8 for the rows): the box average makes them an
// even grey, where a bilinear resize alone would sample mostly one phase
// of the stripes and keep a strong pattern (aliasing).
TEST(RenderImageTest, AveragesAnAxisThatShrinksTwiceOrMore) {
  std::vector<uint8_t> stripes(240 * 320 * 3, 0);
  for (size_t i = 0; i < stripes.size(); i += 6) {
    stripes[i] = stripes[i + 1] = stripes[i + 2] = 255;
  }
  tjhandle handle = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(handle, stripes.data(), 320, 0, 240, TJPF_RGB, &out,
                        &size, TJSAMP_444, 100, 0),
            0);
  const std::string jpeg(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(handle);
  const View view = MakeView(0, 0, 320, 240, 150, 230);
  ASSERT_EQ(PlanRender(320, 240, view).scale, 8);
  const cv::Mat fused = Fused(jpeg, view);
  cv::Scalar mean, stddev;
  cv::meanStdDev(fused.reshape(1), mean, stddev);
  EXPECT_NEAR(mean[0], 127.5, 8);
  EXPECT_LT(stddev[0], 12);
}

TEST(RenderImageTest, CatchesAWindowOffByOneBlock) {
  const std::string jpeg = MakeJpeg(640, 480, 1);
  const cv::Mat full = FullDecode(jpeg);
  const View view = MakeView(100, 60, 320, 240, 160, 120);
  const View shifted = MakeView(108, 60, 320, 240, 160, 120);
  const Difference d = Compare(Fused(jpeg, view), Reference(full, shifted));
  EXPECT_TRUE(d.mean >= kMaxMean || d.p995 > kMaxP995)
      << "mean " << d.mean << ", p99.5 " << d.p995;
}

TEST(RenderImageTest, PadsTheOutsideOfTheImageWithZeros) {
  const std::string jpeg = MakeJpeg(120, 80, 3);
  const cv::Mat full = FullDecode(jpeg);
  // A 160 x 100 centre crop of a 120 x 80 image: 20 columns of padding on
  // each side, 10 rows above and below.
  const cv::Mat fused = Fused(jpeg, MakeView(-20, -10, 160, 100, 160, 100));
  EXPECT_EQ(cv::countNonZero(fused(cv::Rect(0, 0, 160, 10)).reshape(1)), 0);
  EXPECT_EQ(cv::countNonZero(fused(cv::Rect(0, 0, 20, 100)).reshape(1)), 0);
  EXPECT_EQ(cv::countNonZero(fused(cv::Rect(140, 0, 20, 100)).reshape(1)), 0);
  const Difference d = Compare(fused(cv::Rect(20, 10, 120, 80)), full);
  EXPECT_EQ(d.max, 0);
}

TEST(PlanRenderTest, PicksTheSmallestScaleThatCoversTheOutput) {
  // 480 rows: 3/8 gives 180 < 224, 4/8 gives 240.
  EXPECT_EQ(PlanRender(640, 480, MakeView(0, 0, 640, 480, 224, 224)).scale, 4);
  EXPECT_EQ(PlanRender(640, 480, MakeView(0, 0, 640, 480, 80, 60)).scale, 1);
  EXPECT_EQ(PlanRender(640, 480, MakeView(0, 0, 100, 100, 224, 224)).scale, 8);
  // 300 pixels: 6/8 would give 225, but only 1/8, 2/8 and 4/8 (150) are
  // tried below 8/8.
  EXPECT_EQ(PlanRender(640, 480, MakeView(40, 16, 300, 300, 224, 224)).scale,
            8);
  // 4/8 of 500 x 460 is 250 x 230. The window is placed to the nearest
  // scaled pixel: 41 / 2 = 20.5 -> 21, 541 / 2 = 270.5 -> 271.
  const RenderPlan plan =
      PlanRender(640, 480, MakeView(41, 16, 500, 460, 224, 224));
  EXPECT_EQ(plan.scale, 4);
  EXPECT_EQ(plan.window.x0, 21);
  EXPECT_EQ(plan.window.x1, 271);
  EXPECT_EQ(plan.window.y0, 8);
  EXPECT_EQ(plan.window.y1, 238);
  EXPECT_FALSE(plan.padded);
}

TEST(PlanRenderTest, ClipsARectangleThatLeavesTheImage) {
  const RenderPlan plan =
      PlanRender(120, 80, MakeView(-20, -10, 160, 100, 160, 100));
  EXPECT_TRUE(plan.padded);
  EXPECT_EQ(plan.region.x0, 20);
  EXPECT_EQ(plan.region.x1, 140);
  EXPECT_EQ(plan.region.y0, 10);
  EXPECT_EQ(plan.region.y1, 90);
  EXPECT_TRUE(PlanRender(120, 80, MakeView(200, 0, 10, 10, 5, 5)).empty());
}

}  // namespace
}  // namespace stoker::pipeline
