// The planned geometry of one sample's image, and its one-shot execution.
//
// Geometry ops do not touch pixels: they edit a View, a rectangle in source
// pixels plus an output size and a flip flag. Once every geometry op has
// run, the view is rendered in one pass, in steps so that pixel ops can run
// between them: PlanRender picks the part of the image under the rectangle
// and the smallest scale M/8 the decoder offers (JPEG's DCT scales: M in 1,
// 2, 4, 8; PNG: 8) that still has at least as many pixels as the output;
// RenderView decodes only that window (for JPEG only its blocks),
// box-averages an axis that would still shrink 2x or more (BoxReduce) and
// resizes it to the output size with OpenCV's INTER_LINEAR; WriteRendered
// converts it (flip, dtype, layout) into the destination. Besides the
// destination, the only buffers are the decoded window, the box-averaged
// one where needed and, when the output is not plain uint8 HWC, the resized
// image (none when the window already has the output size). A uint8 HWC
// output is rendered straight into the destination, and flipped there.
//
// Precision: the rectangle is placed in the scaled image to the nearest
// scaled pixel, so its edges may move by up to half a scaled pixel, which is
// at most half an output pixel (the scaled window is never smaller than the
// output). A rectangle reaching past the image reads zeros there, as
// torchvision pads a center_crop larger than the image.
//
// Thread-safety: plain values and functions of their arguments; the
// decoder and buffers passed in belong to the calling thread.
#ifndef STOKER_SERVER_PIPELINE_IMAGE_PLAN_H_
#define STOKER_SERVER_PIPELINE_IMAGE_PLAN_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/pipeline/decoders/image_decoder.h"
#include "server/pipeline/image_buffer.h"
#include "server/pipeline/pixel_convert.h"

namespace stoker::pipeline {

// Nanoseconds spent per stage of one sample: decode is JPEG work, augment
// is resize and flip, collate is the conversion into the destination.
struct StageTimes {
  int64_t decode_ns = 0, augment_ns = 0, collate_ns = 0;
};

// How the last resampling step to the output size weighs source pixels
// (resize and random_resized_crop's `interpolation`): bilinear, or bicubic
// with OpenCV's a = -0.75 kernel, which torch's tensor bicubic uses too
// (PIL's is a = -0.5; docs/augmentations.md has the measured difference).
enum class Interpolation { kBilinear, kBicubic };

// What a sample's image becomes: the source rectangle [x, x + width) x
// [y, y + height) in source pixels, resampled to out_width x out_height
// with `interpolation`, then mirrored left-right when flip is set.
struct View {
  double x = 0, y = 0, width = 0, height = 0;
  int out_width = 0, out_height = 0;
  bool flip = false;
  Interpolation interpolation = Interpolation::kBilinear;
};

// The whole image at its own size.
View FullView(int width, int height);

// Crops `view` to the rectangle (top, left, height, width) given in the
// pixels of its output as they look after the flip, and makes that crop
// the new output size. The flip flag is kept.
void CropView(int top, int left, int height, int width, View* view);

// How RenderView executes a view of a source_width x source_height image.
struct RenderPlan {
  // Part of the output that the image covers; the rest is padding. Empty
  // (x1 <= x0 or y1 <= y0) when the rectangle misses the image.
  PixelWindow region;
  int scale = 8;        // DCT scale numerator: decode at scale/8.
  PixelWindow window;   // Decoded pixels of the scaled image.
  bool padded = false;  // Whether region is smaller than the output.
  bool empty() const { return region.width() <= 0 || region.height() <= 0; }
};

// `scales` are the decoder's (ImageDecoder::scales()); the smallest of 1/8,
// 2/8 and 4/8 among them that covers the output is chosen, else 8/8.
RenderPlan PlanRender(int source_width, int source_height, const View& view,
                      ScaleSet scales = ScaleSet::Dct());

// The buffers behind one field's rendered image (RenderView). They live on
// the worker's stack for the sample's run, so that the image a pixel op
// works on stays valid until it is written out.
struct RenderBuffers {
  DecodedWindow decoded;
  std::unique_ptr<uint8_t[]> reduced;  // The box-averaged window.
  std::unique_ptr<uint8_t[]> resized;  // The output-size image.
};

// Decodes `view` of the image whose header `decoder` has read and resamples
// it to the output size, uint8 RGB, with the rectangle's outside zero.
// Into `dst` (rows packed, 3 * out_width bytes apart) when it is not null;
// else into `buffers`: the decoded window itself when it already has the
// output size, else a new output-size buffer. Returns where the image is.
// Adds decode and augment times to *times when not null. DataLoss when the
// image is undecodable. The last step to the output size is the view's
// interpolation (INTER_LINEAR or INTER_CUBIC), after a DCT scale and a box
// average have left less than 2x to shrink. With `nearest` (a mask of class
// ids) no pixel is averaged: the decode is at full size, nothing is
// box-reduced, and each output pixel takes the source pixel under its
// centre (INTER_NEAREST_EXACT), whatever the view's interpolation.
// REQUIRES: decoder->ReadHeader succeeded and nothing else was decoded.
absl::StatusOr<ImageBuffer> RenderView(const View& view, ImageDecoder* decoder,
                                       uint8_t* dst, RenderBuffers* buffers,
                                       StageTimes* times, bool nearest = false);

// RenderView for several views of one image, a multi-view pipeline's
// instances (docs/pipeline-design.md §4.4): decodes the union of the
// windows they need once, into buffers[0].decoded, at the largest DCT scale
// any of them needs, and resamples view i from it into dst[i] when that is
// not null, else into buffers[i], writing where it is to images[i]. A view
// whose own plan had a smaller scale is box-averaged from the larger one
// instead, so it weighs at least as many source pixels as alone. No image
// is the decoded window itself when there are several views (each may be
// changed in place by pixel ops). The decoded window is never larger than
// one view at full size could ask for: the image at the scale chosen. With
// one view this is RenderView. DataLoss when the image is undecodable.
// REQUIRES: the spans have views.size() entries (at least one);
// decoder->ReadHeader succeeded and nothing else was decoded.
absl::Status RenderViews(absl::Span<const View> views, ImageDecoder* decoder,
                         absl::Span<uint8_t* const> dst,
                         absl::Span<RenderBuffers> buffers,
                         absl::Span<ImageBuffer> images, StageTimes* times,
                         bool nearest = false);

// Mirrors `image` left-right in place.
void MirrorInPlace(const ImageBuffer& image);

// Writes `image` (from RenderView) into `dst` through `converter`, mirrored
// when `flip`. When `image` is `dst` itself (RenderView into dst, for a
// passthrough converter), only mirrors it in place. Adds collate time.
void WriteRendered(const ImageBuffer& image, bool flip,
                   const PixelConverter& converter, uint8_t* dst,
                   StageTimes* times);

// RenderView, then WriteRendered with the view's flip: `view` of the image
// into `dst` (ImageShape(converter.format(), out_height, out_width)
// elements), through a temporary only where the output is not uint8 HWC.
// DataLoss when the image is undecodable.
// REQUIRES: decoder->ReadHeader succeeded and nothing else was decoded.
absl::Status RenderImage(const View& view, const PixelConverter& converter,
                         ImageDecoder* decoder, uint8_t* dst,
                         StageTimes* times);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_IMAGE_PLAN_H_
