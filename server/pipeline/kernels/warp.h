// Affine warps of a uint8 image in place, as torchvision 0.14's tensor path:
// F.affine and F.rotate (expand=False) on a uint8 tensor.
//
// The matrix is torchvision's `_get_inverse_affine_matrix` (the map from
// output to input pixels, about a centre given relative to the image
// centre). Sampling follows `_gen_affine_grid` and `grid_sample` with
// align_corners=False, zero padding, in float32: the output pixel (x, y)
// relative to the centre, the grid value (x a + y b) + c with the
// coefficients divided by half the image size, the source index
// (g + 1) * size / 2 - 0.5, then nearest (rounding half to even) or
// bilinear. torch's AVX2 kernel fuses the index's multiply-add and the
// bilinear sum of the four weighted neighbours into fused multiply-adds;
// here each is a double product and sum rounded to float once, which
// equals a fused multiply-add except when that double lands exactly half
// way between two floats. With a fill colour torchvision warps a mask of
// ones beside the image: nearest takes the fill where the mask is < 0.5,
// bilinear blends image * mask + (1 - mask) * fill. Without one (the
// policies' default) outside pixels are 0 and weigh in as 0. The result is
// rounded half to even, as `_cast_squeeze_out`.
//
// Thread-safety: pure functions of their arguments; the image belongs to
// the caller.
#ifndef STOKER_SERVER_PIPELINE_KERNELS_WARP_H_
#define STOKER_SERVER_PIPELINE_KERNELS_WARP_H_

#include <array>
#include <optional>

#include "server/pipeline/image_buffer.h"

namespace stoker::pipeline::kernels {

enum class WarpInterpolation { kNearest, kBilinear };

// The fill colour of pixels that map outside the image, per channel; one
// value is used for every channel. nullopt: torchvision's fill=None.
using WarpFill = std::optional<std::array<float, 3>>;

// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale,
// shear), inverted=True: angle and shears in degrees, `center` relative to
// the image centre. Returns [a, b, c, d, e, f], input = M * output.
// REQUIRES: scale > 0.
std::array<double, 6> InverseAffineMatrix(double center_x, double center_y,
                                          double angle, double translate_x,
                                          double translate_y, double scale,
                                          double shear_x, double shear_y);

// Warps `image` by the inverse matrix `m` (as InverseAffineMatrix returns).
// REQUIRES: image.channels is 1 or 3.
void WarpAffine(const ImageBuffer& image, const std::array<double, 6>& m,
                WarpInterpolation interpolation, const WarpFill& fill);

// Where an op's warp turns: the image centre, or a point in pixel
// coordinates (origin at the top-left corner), as torchvision's `center`.
struct WarpCenter {
  bool given = false;
  double x = 0, y = 0;
};

// F.affine(img, angle, [translate_x, translate_y], scale, [shear_x,
// shear_y], interpolation, fill, center) on a tensor.
void Affine(const ImageBuffer& image, double angle, double translate_x,
            double translate_y, double scale, double shear_x, double shear_y,
            WarpInterpolation interpolation, const WarpFill& fill,
            const WarpCenter& center = {});

// F.rotate(img, angle, interpolation, expand=False, center, fill): angle in
// degrees, counter-clockwise.
void Rotate(const ImageBuffer& image, double angle,
            WarpInterpolation interpolation, const WarpFill& fill,
            const WarpCenter& center = {});

}  // namespace stoker::pipeline::kernels

#endif  // STOKER_SERVER_PIPELINE_KERNELS_WARP_H_
