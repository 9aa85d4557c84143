// The planned geometry of one sample's image, and its one-shot execution.
//
// Geometry ops do not touch pixels: they edit a View, a rectangle in source
// pixels plus an output size and a flip flag. Once every op has run,
// RenderImage executes the view in one pass: it decodes only the part of
// the image under the rectangle (for JPEG only its blocks), at the smallest
// scale M/8 the decoder offers (JPEG's DCT scales: M in 1, 2, 4, 8; PNG: 8)
// that still has at least as many pixels as the output, box-averages an
// axis that would still shrink 2x or more (BoxReduce), resizes that window
// to the output size with OpenCV's INTER_LINEAR, and converts it (flip,
// dtype, layout) straight into the destination. Besides the destination,
// the only buffers are the decoded window, the box-averaged one where
// needed and, when the output is not plain uint8 HWC, the resized image.
//
// Precision: the rectangle is placed in the scaled image to the nearest
// scaled pixel, so its edges may move by up to half a scaled pixel, which is
// at most half an output pixel (the scaled window is never smaller than the
// output). A rectangle reaching past the image reads zeros there, as
// torchvision pads a center_crop larger than the image.
//
// Thread-safety: plain values and functions of their arguments; the
// decoder passed to RenderImage belongs to the calling thread.
#ifndef STOKER_SERVER_PIPELINE_IMAGE_PLAN_H_
#define STOKER_SERVER_PIPELINE_IMAGE_PLAN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/pipeline/decoders/image_decoder.h"
#include "server/pipeline/pixel_convert.h"

namespace stoker::pipeline {

// Nanoseconds spent per stage of one sample: decode is JPEG work, augment
// is resize and flip, collate is the conversion into the destination.
struct StageTimes {
  int64_t decode_ns = 0, augment_ns = 0, collate_ns = 0;
};

// What a sample's image becomes: the source rectangle [x, x + width) x
// [y, y + height) in source pixels, resampled to out_width x out_height,
// then mirrored left-right when flip is set.
struct View {
  double x = 0, y = 0, width = 0, height = 0;
  int out_width = 0, out_height = 0;
  bool flip = false;
};

// The whole image at its own size.
View FullView(int width, int height);

// Crops `view` to the rectangle (top, left, height, width) given in the
// pixels of its output as they look after the flip, and makes that crop
// the new output size. The flip flag is kept.
void CropView(int top, int left, int height, int width, View* view);

// How RenderImage executes a view of a source_width x source_height image.
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

// Decodes, resizes and converts `view` of the image whose header `decoder`
// has read, into `dst` (ImageShape(converter.format(), out_height,
// out_width) elements). Adds its stage times to *times when not null.
// DataLoss when the image is undecodable.
// REQUIRES: decoder->ReadHeader succeeded and nothing else was decoded.
absl::Status RenderImage(const View& view, const PixelConverter& converter,
                         ImageDecoder* decoder, uint8_t* dst,
                         StageTimes* times);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_IMAGE_PLAN_H_
