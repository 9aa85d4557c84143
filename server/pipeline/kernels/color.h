// Colour kernels: in-place changes of a uint8 RGB image's pixel values,
// shared by the colour ops and the augmentation policies.
//
// Each is a port of torchvision 0.14's tensor path
// (torchvision/transforms/functional_tensor.py) on a uint8 image, including
// its arithmetic: float32 products and sums, each rounded as torch rounds
// them (this file is compiled without FMA contraction), a blend clamped to
// [0, 255] then truncated to uint8 (`_blend`), grayscale by truncation
// (`rgb_to_grayscale`), hue through float32 HSV (`adjust_hue`). Ops that
// map each channel value to another (brightness, solarize, posterize, and
// contrast, autocontrast and equalize once their statistics are known) go
// through a 256-entry table. tests/python/test_op_parity.py holds each
// kernel against torchvision on the same images; docs/augmentations.md has
// the measured differences.
//
// Thread-safety: pure functions of their arguments; the image belongs to
// the caller.
#ifndef STOKER_SERVER_PIPELINE_KERNELS_COLOR_H_
#define STOKER_SERVER_PIPELINE_KERNELS_COLOR_H_

#include "server/pipeline/image_buffer.h"

namespace stoker::pipeline::kernels {

// REQUIRES for every kernel: image.channels == 3. Factors are as
// torchvision's: 0 gives black (brightness), the image's mean gray
// (contrast) or its grayscale (saturation); 1 leaves the image as it is.
// REQUIRES: factor >= 0.
void AdjustBrightness(const ImageBuffer& image, double factor);
void AdjustContrast(const ImageBuffer& image, double factor);
void AdjustSaturation(const ImageBuffer& image, double factor);

// Rotates the hue by `hue_factor` turns. REQUIRES: -0.5 <= hue_factor <=
// 0.5.
void AdjustHue(const ImageBuffer& image, double hue_factor);

// Replaces each pixel by its luma 0.2989 R + 0.587 G + 0.114 B, truncated,
// in all three channels.
void Grayscale(const ImageBuffer& image);

// Inverts (255 - v) every channel value >= threshold.
void Solarize(const ImageBuffer& image, double threshold);

// Inverts every channel value: 255 - v (F.invert on uint8).
void Invert(const ImageBuffer& image);

// Keeps the top `bits` bits of every channel value. REQUIRES: 0 <= bits <= 8.
void Posterize(const ImageBuffer& image, int bits);

// Equalizes each channel's histogram, with torchvision's step rule (a
// channel whose values but the largest number fewer than 255 pixels stays
// as it is).
void Equalize(const ImageBuffer& image);

// Stretches each channel from [min, max] to [0, 255]; a constant channel
// stays as it is.
void AutoContrast(const ImageBuffer& image);

// Blends the image with its 3x3 smoothing ([1 1 1; 1 5 1; 1 1 1] / 13, the
// border rows and columns kept) by `factor`: 0 smooths, 1 keeps, 2
// sharpens. An image 2 pixels wide or high or less stays as it is.
// REQUIRES: factor >= 0.
void AdjustSharpness(const ImageBuffer& image, double factor);

}  // namespace stoker::pipeline::kernels

#endif  // STOKER_SERVER_PIPELINE_KERNELS_COLOR_H_
