// Gaussian blur of a uint8 RGB image in place, as torchvision 0.14's
// tensor gaussian_blur: its float32 kernel (`_get_gaussian_kernel1d`:
// exp(-x^2 / (2 sigma^2)) on x = -(k-1)/2 .. (k-1)/2, normalized to sum 1),
// reflected borders (torch's "reflect": the edge pixel is not repeated), a
// float convolution, and rounding half to even. Here the 2-D kernel is
// applied as its two 1-D factors (OpenCV's sepFilter2D); the sums differ
// from torch's 2-D convolution by float rounding only, which moves a value
// across a rounding boundary now and then (docs/augmentations.md has the
// measured share).
//
// Thread-safety: pure functions of their arguments; the image belongs to
// the caller.
#ifndef STOKER_SERVER_PIPELINE_KERNELS_BLUR_H_
#define STOKER_SERVER_PIPELINE_KERNELS_BLUR_H_

#include <vector>

#include "server/pipeline/image_buffer.h"

namespace stoker::pipeline::kernels {

// torchvision's _get_gaussian_kernel1d(size, sigma) in float32.
// REQUIRES: size >= 1, sigma > 0.
std::vector<float> GaussianKernel1d(int size, double sigma);

// Blurs with a kernel `size_x` wide and `size_y` high of standard
// deviations sigma_x and sigma_y. A kernel wider than the image reflects
// more than once. REQUIRES: image.channels == 3; sizes odd and >= 1; sigmas
// > 0.
void GaussianBlur(const ImageBuffer& image, int size_x, int size_y,
                  double sigma_x, double sigma_y);

}  // namespace stoker::pipeline::kernels

#endif  // STOKER_SERVER_PIPELINE_KERNELS_BLUR_H_
