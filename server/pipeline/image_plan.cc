#include "server/pipeline/image_plan.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "absl/container/inlined_vector.h"

#include "server/base/clock.h"
#include "server/pipeline/box_reduce.h"

namespace stoker::pipeline {
namespace {

// Tolerance for comparing pixel extents that are products of doubles.
constexpr double kEpsilon = 1e-6;

// BoxReduce sums a block in 16 bits; a larger block (a tiny output from a
// huge window even at scale 1/8) takes OpenCV's INTER_AREA.
constexpr int kMaxBoxArea = 256;

// OpenCV would otherwise run large resizes on its own thread pool; the
// worker pool is the only source of parallelism, and ops start no threads.
void KeepOpenCvOnCallingThread() {
  static const bool kDone = [] {
    cv::setNumThreads(0);
    return true;
  }();
  (void)kDone;
}

// The output pixels [first, second) along one axis whose source lies inside
// [0, size), for a rectangle starting at `start` with `step` source pixels
// per output pixel and `out` output pixels.
std::pair<int, int> CoveredRange(double start, double step, int out, int size) {
  const double lo = std::max(start, 0.0);
  const double hi = std::min(start + step * out, static_cast<double>(size));
  if (hi <= lo) return {0, 0};
  const auto to_out = [&](double s) {
    return static_cast<int>(
        std::clamp<long>(std::lround((s - start) / step), 0, out));
  };
  return {to_out(lo), to_out(hi)};
}

// Places the source span [lo, hi) into the image scaled by scale/8, to the
// nearest scaled pixel, keeping at least one pixel.
std::pair<int, int> ScaledSpan(double lo, double hi, int scale, int size) {
  const int scaled = ScaledImageSize(size, scale);
  const int first = static_cast<int>(
      std::clamp<long>(std::lround(lo * scale / 8), 0, scaled - 1));
  const int last = static_cast<int>(
      std::clamp<long>(std::lround(hi * scale / 8), first + 1, scaled));
  return {first, last};
}

}  // namespace

View FullView(int width, int height) {
  View view;
  view.width = width;
  view.height = height;
  view.out_width = width;
  view.out_height = height;
  return view;
}

void CropView(int top, int left, int height, int width, View* view) {
  const double step_x = view->width / view->out_width;
  const double step_y = view->height / view->out_height;
  // In a flipped view, output column 0 shows the right edge of the source.
  const int from_left = view->flip ? view->out_width - left - width : left;
  view->x += from_left * step_x;
  view->y += top * step_y;
  view->width = width * step_x;
  view->height = height * step_y;
  view->out_width = width;
  view->out_height = height;
}

namespace {

// PlanRender, at `fixed_scale` when it is not 0.
RenderPlan Plan(int source_width, int source_height, const View& view,
                ScaleSet scales, int fixed_scale) {
  RenderPlan plan;
  const double step_x = view.width / view.out_width;
  const double step_y = view.height / view.out_height;
  const auto [ox0, ox1] =
      CoveredRange(view.x, step_x, view.out_width, source_width);
  const auto [oy0, oy1] =
      CoveredRange(view.y, step_y, view.out_height, source_height);
  plan.region = {ox0, oy0, ox1, oy1};
  plan.padded =
      ox0 > 0 || oy0 > 0 || ox1 < view.out_width || oy1 < view.out_height;
  if (plan.empty()) return plan;

  // The source rectangle behind the covered region.
  const double sx0 = std::max(view.x + ox0 * step_x, 0.0);
  const double sx1 = std::min(view.x + ox1 * step_x, 1.0 * source_width);
  const double sy0 = std::max(view.y + oy0 * step_y, 0.0);
  const double sy1 = std::min(view.y + oy1 * step_y, 1.0 * source_height);
  // Smallest scale whose window has at least the output's pixel count on
  // both axes; an upscale decodes at full size. Only 1/8, 2/8 and 4/8 are
  // tried: libjpeg-turbo 2.1 has SIMD code for those, while 3/8, 5/8, 6/8
  // and 7/8 decode more slowly than 8/8 itself (1.1-2x, measured).
  plan.scale = fixed_scale != 0 ? fixed_scale : 8;
  for (int m : {1, 2, 4}) {
    if (fixed_scale == 0 && scales.has(m) &&
        (sx1 - sx0) * m + kEpsilon >= 8.0 * plan.region.width() &&
        (sy1 - sy0) * m + kEpsilon >= 8.0 * plan.region.height()) {
      plan.scale = m;
      break;
    }
  }
  const auto [wx0, wx1] = ScaledSpan(sx0, sx1, plan.scale, source_width);
  const auto [wy0, wy1] = ScaledSpan(sy0, sy1, plan.scale, source_height);
  plan.window = {wx0, wy0, wx1, wy1};
  return plan;
}

}  // namespace

RenderPlan PlanRender(int source_width, int source_height, const View& view,
                      ScaleSet scales) {
  return Plan(source_width, source_height, view, scales, 0);
}

namespace {

// Resamples the decoded `window` of `plan` (empty when the plan is) to the
// view's output size, as RenderView describes. With `may_alias` the result
// may be `window` itself, when that already has the output size.
ImageBuffer Resample(const View& view, const RenderPlan& plan, cv::Mat window,
                     uint8_t* dst, RenderBuffers* buffers, bool nearest,
                     bool may_alias) {
  const cv::Size out_size(view.out_width, view.out_height);
  const cv::Rect region(plan.region.x0, plan.region.y0, plan.region.width(),
                        plan.region.height());
  // The DCT scale leaves the window less than twice the output size on the
  // axis that needs the larger scale, but the other axis of a crop with
  // another aspect ratio than the output's may still shrink 2x or more.
  // Below 2x, INTER_LINEAR weighs every source pixel; beyond, it would skip
  // pixels and alias. So an axis that shrinks k >= 2 times is first
  // box-averaged k:1, which leaves less than 2x for INTER_LINEAR, as PIL's
  // reducing_gap does. cv::resize's INTER_AREA, used here before, took
  // 0.72 ms on such a window (a 460x250 crop to 224x224), more than the
  // decode, and 8.6% of train samples need it (docs/performance.md). The
  // columns or rows past the last whole group of k are dropped, which moves
  // that edge by less than one output pixel.
  if (!window.empty() && !nearest) {
    const int kx = std::max(1, window.cols / region.width);
    const int ky = std::max(1, window.rows / region.height);
    if ((kx > 1 || ky > 1) && kx * ky <= kMaxBoxArea) {
      const cv::Size size(window.cols / kx, window.rows / ky);
      buffers->reduced.reset(new uint8_t[size.area() * 3]);
      cv::Mat reduced(size, CV_8UC3, buffers->reduced.get());
      BoxReduce(window.data, window.step, window.cols, window.rows, kx, ky,
                reduced.data, reduced.step);
      window = reduced;
    } else if (kx > 1 || ky > 1) {
      buffers->reduced.reset(new uint8_t[region.area() * 3]);
      cv::Mat reduced(region.size(), CV_8UC3, buffers->reduced.get());
      cv::resize(window, reduced, region.size(), 0, 0, cv::INTER_AREA);
      window = reduced;
    }
  }

  cv::Mat out;
  if (dst != nullptr) {
    out = cv::Mat(out_size, CV_8UC3, dst);
  } else if (may_alias && !plan.padded && window.size() == out_size) {
    out = window;  // Already the output size: nothing to resample.
  } else {
    buffers->resized.reset(new uint8_t[out_size.area() * 3]);
    out = cv::Mat(out_size, CV_8UC3, buffers->resized.get());
  }
  if (plan.padded) out.setTo(cv::Scalar::all(0));
  if (!plan.empty() && out.data != window.data) {
    cv::Mat target = out(region);
    if (window.size() == target.size()) {
      window.copyTo(target);
    } else {
      // INTER_NEAREST_EXACT samples the source pixel under each output
      // pixel's centre, the convention INTER_LINEAR interpolates at, so a
      // nearest field lands where the image beside it does.
      int interpolation = cv::INTER_LINEAR;
      if (nearest) {
        interpolation = cv::INTER_NEAREST_EXACT;
      } else if (view.interpolation == Interpolation::kBicubic) {
        interpolation = cv::INTER_CUBIC;
      }
      cv::resize(window, target, target.size(), 0, 0, interpolation);
    }
  }
  return ImageBuffer{out.data, out.step, out.cols, out.rows, 3};
}

}  // namespace

absl::Status RenderViews(absl::Span<const View> views, ImageDecoder* decoder,
                         absl::Span<uint8_t* const> dst,
                         absl::Span<RenderBuffers> buffers,
                         absl::Span<ImageBuffer> images, StageTimes* times,
                         bool nearest) {
  KeepOpenCvOnCallingThread();
  const int64_t start_ns = times != nullptr ? NowNs() : 0;
  // A DCT scale averages 8/M pixels, as BoxReduce does: class ids must not
  // be averaged, so a nearest field decodes at full size.
  const ScaleSet scales = nearest ? ScaleSet::Only8() : decoder->scales();
  const int width = decoder->width(), height = decoder->height();
  absl::InlinedVector<RenderPlan, 1> plans;
  int scale = 0;  // The largest any view needs; 0 when all miss the image.
  for (const View& view : views) {
    plans.push_back(PlanRender(width, height, view, scales));
    if (!plans.back().empty()) scale = std::max(scale, plans.back().scale);
  }
  // One decode serves every view: each is planned at the largest scale
  // (which covers its output, since its own smaller one did), and the
  // union of their windows is decoded.
  PixelWindow all;
  bool first = true;
  for (size_t i = 0; i < plans.size(); ++i) {
    RenderPlan& plan = plans[i];
    if (plan.empty()) continue;
    if (plan.scale != scale) {
      plan = Plan(width, height, views[i], scales, scale);
    }
    const PixelWindow& w = plan.window;
    all = first ? w
                : PixelWindow{std::min(all.x0, w.x0), std::min(all.y0, w.y0),
                              std::max(all.x1, w.x1), std::max(all.y1, w.y1)};
    first = false;
  }
  cv::Mat decoded;
  if (scale != 0) {
    DecodedWindow& window = buffers[0].decoded;
    if (absl::Status s = decoder->DecodeWindow(scale, all, &window); !s.ok()) {
      return s;
    }
    decoded = cv::Mat(window.height, window.width, CV_8UC3,
                      window.mutable_data(), window.stride);
  }
  const int64_t decoded_ns = times != nullptr ? NowNs() : 0;
  // Views that share the decoded window must not share their images: a
  // pixel op on one would change what another shows.
  const bool may_alias = views.size() == 1;
  for (size_t i = 0; i < views.size(); ++i) {
    const RenderPlan& plan = plans[i];
    cv::Mat window;
    if (!plan.empty()) {
      window =
          decoded(cv::Rect(plan.window.x0 - all.x0, plan.window.y0 - all.y0,
                           plan.window.width(), plan.window.height()));
    }
    images[i] = Resample(views[i], plan, window, dst[i], &buffers[i], nearest,
                         may_alias);
  }
  if (times != nullptr) {
    times->decode_ns += decoded_ns - start_ns;
    times->augment_ns += NowNs() - decoded_ns;
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageBuffer> RenderView(const View& view, ImageDecoder* decoder,
                                       uint8_t* dst, RenderBuffers* buffers,
                                       StageTimes* times, bool nearest) {
  ImageBuffer image;
  if (absl::Status s =
          RenderViews(absl::MakeConstSpan(&view, 1), decoder,
                      absl::MakeConstSpan(&dst, 1), absl::MakeSpan(buffers, 1),
                      absl::MakeSpan(&image, 1), times, nearest);
      !s.ok()) {
    return s;
  }
  return image;
}

void MirrorInPlace(const ImageBuffer& image) {
  cv::Mat mat(image.height, image.width, CV_8UC3, image.data, image.stride);
  cv::flip(mat, mat, 1);
}

void WriteRendered(const ImageBuffer& image, bool flip,
                   const PixelConverter& converter, uint8_t* dst,
                   StageTimes* times) {
  const int64_t start_ns = times != nullptr ? NowNs() : 0;
  if (image.data == dst) {
    if (flip) MirrorInPlace(image);
  } else {
    converter.Convert(image.data, image.stride, image.width, image.height, flip,
                      dst);
  }
  if (times != nullptr) times->collate_ns += NowNs() - start_ns;
}

absl::Status RenderImage(const View& view, const PixelConverter& converter,
                         ImageDecoder* decoder, uint8_t* dst,
                         StageTimes* times) {
  RenderBuffers buffers;
  absl::StatusOr<ImageBuffer> image =
      RenderView(view, decoder, converter.is_passthrough() ? dst : nullptr,
                 &buffers, times);
  if (!image.ok()) return image.status();
  WriteRendered(*image, view.flip, converter, dst, times);
  return absl::OkStatus();
}

}  // namespace stoker::pipeline
