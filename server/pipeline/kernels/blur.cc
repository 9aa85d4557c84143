#include "server/pipeline/kernels/blur.h"

#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace stoker::pipeline::kernels {

std::vector<float> GaussianKernel1d(int size, double sigma) {
  // torch.linspace(-half, half, size) holds whole or half numbers here, so
  // each point is exact in float32.
  const float half = static_cast<float>((size - 1) * 0.5);
  const float s = static_cast<float>(sigma);
  std::vector<float> kernel(size);
  float sum = 0.0f;
  for (int i = 0; i < size; ++i) {
    const float x = (-half + static_cast<float>(i)) / s;
    kernel[i] = std::exp(-0.5f * (x * x));
    sum += kernel[i];
  }
  for (float& k : kernel) k /= sum;
  return kernel;
}

void GaussianBlur(const ImageBuffer& image, int size_x, int size_y,
                  double sigma_x, double sigma_y) {
  const std::vector<float> kx = GaussianKernel1d(size_x, sigma_x);
  const std::vector<float> ky = GaussianKernel1d(size_y, sigma_y);
  cv::Mat pixels(image.height, image.width, CV_8UC3, image.data, image.stride);
  cv::Mat blurred;
  cv::sepFilter2D(pixels, blurred, CV_32F, cv::Mat(kx), cv::Mat(ky),
                  cv::Point(-1, -1), 0, cv::BORDER_REFLECT_101);
  // convertTo rounds half to even (cvRound), as torch.round does.
  blurred.convertTo(pixels, CV_8U);
}

}  // namespace stoker::pipeline::kernels
