#include "server/pipeline/box_reduce.h"

#include <cstdint>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::pipeline {
namespace {

cv::Mat RandomImage(int width, int height, uint64_t seed) {
  cv::Mat image(height, width, CV_8UC3);
  cv::RNG rng(seed);
  rng.fill(image, cv::RNG::UNIFORM, 0, 256);
  return image;
}

cv::Mat Reduce(const cv::Mat& src, int kx, int ky) {
  cv::Mat out(src.rows / ky, src.cols / kx, CV_8UC3, cv::Scalar::all(7));
  BoxReduce(src.data, src.step, src.cols, src.rows, kx, ky, out.data,
            out.step);
  return out;
}

TEST(BoxReduceTest, AveragesEachBlockPerChannel) {
  // One row of four pixels, reduced 2:1 across: channel c of pixel x is
  // 10 * x + c, so the means are 5 + c and 25 + c.
  cv::Mat src(1, 4, CV_8UC3);
  for (int x = 0; x < 4; ++x) {
    for (int c = 0; c < 3; ++c) src.at<cv::Vec3b>(0, x)[c] = 10 * x + c;
  }
  const cv::Mat out = Reduce(src, 2, 1);
  ASSERT_EQ(out.cols, 2);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(out.at<cv::Vec3b>(0, 0)[c], 5 + c);
    EXPECT_EQ(out.at<cv::Vec3b>(0, 1)[c], 25 + c);
  }
}

TEST(BoxReduceTest, RoundsToNearest) {
  // Blocks of three rows: sums 1 (mean 0.33), 2 (0.67) and 254 (84.67).
  cv::Mat src(3, 3, CV_8UC3, cv::Scalar::all(0));
  src.at<cv::Vec3b>(0, 0) = {1, 1, 1};
  src.at<cv::Vec3b>(0, 1) = {1, 1, 1};
  src.at<cv::Vec3b>(2, 1) = {1, 1, 1};
  src.at<cv::Vec3b>(0, 2) = {254, 254, 254};
  const cv::Mat out = Reduce(src, 1, 3);
  ASSERT_EQ(out.rows, 1);
  EXPECT_EQ(out.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 0));
  EXPECT_EQ(out.at<cv::Vec3b>(0, 1), cv::Vec3b(1, 1, 1));
  EXPECT_EQ(out.at<cv::Vec3b>(0, 2), cv::Vec3b(85, 85, 85));
}

// OpenCV's INTER_AREA at whole factors is the same block mean (rounded in
// its own fixed point), on the part of the image that whole blocks cover.
TEST(BoxReduceTest, MatchesOpenCvAreaAtWholeFactors) {
  const cv::Mat src = RandomImage(97, 61, 1);
  for (int kx = 1; kx <= 5; ++kx) {
    for (int ky = 1; ky <= 5; ++ky) {
      const cv::Mat whole =
          src(cv::Rect(0, 0, src.cols / kx * kx, src.rows / ky * ky));
      cv::Mat want;
      cv::resize(whole, want, cv::Size(whole.cols / kx, whole.rows / ky), 0,
                 0, cv::INTER_AREA);
      const cv::Mat got = Reduce(src, kx, ky);
      ASSERT_EQ(got.size(), want.size()) << kx << "x" << ky;
      cv::Mat diff;
      cv::absdiff(got, want, diff);
      double max = 0;
      cv::minMaxLoc(diff.reshape(1), nullptr, &max);
      EXPECT_LE(max, 1) << kx << "x" << ky;
    }
  }
}

TEST(BoxReduceTest, ReadsRowsByStrideAndHandlesTheLargestBlock) {
  // A window inside a larger image (stride > 3 * width) of a constant
  // colour, reduced by a 16x16 block: the sums reach 255 * 256.
  cv::Mat big = RandomImage(80, 40, 2);
  cv::Mat window = big(cv::Rect(5, 3, 64, 32));
  window.setTo(cv::Scalar(255, 128, 1));
  const cv::Mat out = Reduce(window, 16, 16);
  ASSERT_EQ(out.size(), cv::Size(4, 2));
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) {
      EXPECT_EQ(out.at<cv::Vec3b>(y, x), cv::Vec3b(255, 128, 1));
    }
  }
}

}  // namespace
}  // namespace stoker::pipeline
