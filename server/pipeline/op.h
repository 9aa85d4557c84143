// The ops of a pipeline: one interface per kind of op, and AnyOp, the
// variant an op's factory (registry.h) returns.
//
// A sample runs its ops kind by kind, in config order:
//   decode    decode_image: which record field holds the image. The
//             pipeline reads that image's header; no pixel is decoded yet.
//   fields    drop_fields, ragged_limit: which of the fields no op binds
//             pass through to the batch, and how much room a ragged one
//             gets (passthrough.h). Used when the pipeline is bound.
//   geometry  crop, resize, flip: edit the sample's View (image_plan.h), a
//             plan shared by its spatial fields. Still nothing is decoded.
//   pixel     colour and the like: work in place on the rendered image,
//             which the pipeline decodes and resamples from the final View
//             once, after the last geometry op (image_plan.h).
//   format    normalize, layout: set how the image is written into the
//             batch. They do not depend on the sample, so they run once,
//             when the pipeline is created.
//   tensor    work on the written output, in its dtype and layout.
//   batch     mixup, cutmix: once per batch, after the batch is collated,
//             on all its images and their soft labels together (one per
//             pipeline; see BatchOp).
// The alternative an AnyOp holds is the op's kind, so the pipeline knows
// what an op is without a downcast. Each op lives in one file in ops/ with
// one registration line.
//
// Thread-safety: ops are immutable after their factory returns. Apply is
// const and may run on many threads at once; its randomness comes only from
// the SampleRng it is handed. Ops never start threads.
#ifndef STOKER_SERVER_PIPELINE_OP_H_
#define STOKER_SERVER_PIPELINE_OP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/pipeline/image_buffer.h"
#include "server/pipeline/image_plan.h"
#include "server/pipeline/kernels/warp.h"
#include "server/pipeline/pixel_convert.h"
#include "server/pipeline/sample_rng.h"
#include "server/tensor/dtype.h"

namespace stoker::pipeline {

// What an op works on, which fixes where it may stand in a pipeline
// (docs/pipeline-design.md §3.1): decode and field selection, then
// geometry, pixel, format, tensor and batch ops, in that order. AnyOp holds
// the kinds that ops exist for today.
enum class OpKind {
  kDecode,
  kFields,
  kGeometry,
  kPixel,
  kFormat,
  kTensor,
  kBatch,
};

// "decode", "fields", "geometry", "pixel", "format", "tensor", "batch".
std::string_view OpKindName(OpKind kind);

// What an op does to the output size, known before any image is seen.
struct SizeEffect {
  enum Kind {
    kKeeps,  // The size stays as it was.
    kFixes,  // Every sample ends up height x width.
    kVaries  // The size depends on the image.
  };
  Kind kind = kKeeps;
  int height = 0, width = 0;  // When kind is kFixes.
};

// A decode op: the record field that holds an encoded image. The pipeline
// picks the decoder by the bytes' content and points the View at the whole
// image. A pipeline may decode several spatial fields (an image and its
// segmentation mask): they share the View, so every geometry op makes one
// choice for all of them, and each becomes its own output.
struct DecodeSpec {
  std::string field;
  // interpolation: nearest. The field holds class ids (a mask): it is
  // rendered and warped without averaging (no DCT scaling, no box filter,
  // INTER_NEAREST_EXACT), written as uint8 whatever normalize says, and no
  // pixel or tensor op may bind it.
  bool nearest = false;
  // What warps bound to another field fill this field's outside pixels
  // with. nullopt: 0 for a nearest field (torchvision's fill for a Mask),
  // the warp's own fill otherwise.
  kernels::WarpFill fill;
};

// What a ragged field whose value is longer than its ragged_limit does.
enum class RaggedOverflow {
  kFail,      // The stream fails (ResourceExhausted).
  kSkip,      // The sample is left out, as a skipped corrupt one.
  kTruncate,  // The first max_length rows (or bytes) are kept.
};

// A fields op: fields to leave out of the batch (drop_fields), or the slot
// size of one ragged field (ragged_limit; `limit_field` empty otherwise).
struct FieldSelection {
  std::vector<std::string> drop;
  std::string limit_field;
  uint64_t max_length = 0;
  RaggedOverflow overflow = RaggedOverflow::kFail;
};

class GeometryOp {
 public:
  virtual ~GeometryOp() = default;

  virtual SizeEffect size_effect() const { return {}; }

  // Edits the sample's view; `view` holds the image's size in source and
  // output pixels as the ops before left it.
  virtual absl::Status Apply(View& view, SampleRng& rng) const = 0;
};

// One rendered spatial field of a sample, as a positional pixel op sees it.
struct SpatialImage {
  ImageBuffer image;
  bool nearest = false;    // DecodeSpec::nearest.
  kernels::WarpFill fill;  // DecodeSpec::fill.
};

// What a pixel op works on: the rendered, output-size image of the field it
// is bound to (main), uint8 HWC, and for positional ops (warps) every
// spatial field of the sample, all of one size. Borrowed for one Apply; the
// op may change every pixel in place but not the size. A colour op touches
// main() only; a warp draws once and applies the same warp to each field
// through ForEachSpatial, so an image and its mask stay aligned.
class PixelTargets {
 public:
  // The sample has one spatial field.
  explicit PixelTargets(const ImageBuffer& main)
      : single_{main, false, std::nullopt}, spatial_(&single_, 1), main_(0) {}
  // `spatial` holds every spatial field, `main` the bound one's index.
  // Borrows `spatial` for the object's life.
  PixelTargets(absl::Span<const SpatialImage> spatial, int main)
      : spatial_(spatial), main_(main) {}

  // spatial_ may point at single_.
  PixelTargets(const PixelTargets&) = delete;
  PixelTargets& operator=(const PixelTargets&) = delete;

  const ImageBuffer& main() const { return spatial_[main_].image; }
  absl::Span<const SpatialImage> spatial() const { return spatial_; }

  // Calls warp(image, interpolation, fill) on main() with the op's
  // `interpolation` and `fill`, then on every other spatial field with its
  // own: nearest for a nearest field, else the op's; its DecodeSpec::fill
  // when given, else 0 for a nearest field and the op's fill otherwise.
  template <typename Warp>
  void ForEachSpatial(kernels::WarpInterpolation interpolation,
                      const kernels::WarpFill& fill, const Warp& warp) const {
    warp(main(), interpolation, fill);
    for (size_t i = 0; i < spatial_.size(); ++i) {
      if (static_cast<int>(i) == main_) continue;
      const SpatialImage& other = spatial_[i];
      kernels::WarpFill other_fill = other.fill;
      if (!other_fill) {
        other_fill =
            other.nearest ? kernels::WarpFill(std::array<float, 3>{}) : fill;
      }
      warp(other.image,
           other.nearest ? kernels::WarpInterpolation::kNearest : interpolation,
           other_fill);
    }
  }

 private:
  SpatialImage single_;
  absl::Span<const SpatialImage> spatial_;
  int main_;
};

class PixelOp {
 public:
  virtual ~PixelOp() = default;

  // Whether the op commutes with a horizontal flip. The flip of the view is
  // applied as the image is written out (free there); before an op that
  // does not commute with it (anything positional) the pipeline mirrors the
  // image first, so the op sees what torchvision's would after the flip.
  virtual bool flip_invariant() const { return true; }

  virtual absl::Status Apply(const PixelTargets& targets,
                             SampleRng& rng) const = 0;
};

class FormatOp {
 public:
  virtual ~FormatOp() = default;

  // Sets its part of the output format; the same for every sample.
  virtual void Apply(OutputFormat& format) const = 0;
};

// One sample's written image output: `height` x `width` x `channels`
// elements of `dtype` in `layout`, at `data`. Borrowed for one Apply.
struct TensorRef {
  uint8_t* data = nullptr;
  tensor::DType dtype = tensor::DType::kUint8;
  Layout layout = Layout::kHwc;
  int height = 0, width = 0, channels = 3;
};

class TensorOp {
 public:
  virtual ~TensorOp() = default;

  // Whether the op can work on outputs of `format`; the pipeline asks once,
  // when it is created. InvalidArgument saying why not.
  virtual absl::Status Check(const OutputFormat& format) const {
    return absl::OkStatus();
  }

  virtual absl::Status Apply(const TensorRef& out, SampleRng& rng) const = 0;
};

// The images of a collated batch, `size` samples of one TensorRef's shape
// each, back to back from `data`, and their soft labels: float32
// [size, num_classes] at `soft`. Borrowed for one Apply.
struct BatchImages {
  TensorRef image;  // Sample 0; sample i at image.data + i * SampleBytes().
  uint32_t size = 0;
  float* soft = nullptr;
  int num_classes = 0;

  size_t SampleBytes() const {
    return tensor::DTypeSize(image.dtype) *
           static_cast<size_t>(image.height) * image.width * image.channels;
  }
  uint8_t* Sample(uint32_t i) const { return image.data + i * SampleBytes(); }
};

// What a batch op turns into soft labels: the integer scalar field that
// holds each sample's class, the number of classes, and the label
// smoothing (timm's: off = smoothing / num_classes, on = 1 - smoothing +
// off). The pipeline writes each sample's smoothed one-hot into the output
// `<label>_soft` (float32 [num_classes]) and refuses a label outside
// [0, num_classes) as that sample's DataLoss.
struct SoftLabels {
  std::string label = "label";
  int num_classes = 0;
  double smoothing = 0.0;
};

class BatchOp {
 public:
  virtual ~BatchOp() = default;

  virtual const SoftLabels& soft_labels() const = 0;

  // Whether the op can work on outputs of `format`; asked once, when the
  // pipeline is created. InvalidArgument saying why not.
  virtual absl::Status Check(const OutputFormat& format) const {
    return absl::OkStatus();
  }

  // Mixes the batch in place. `rng` is the batch's generator
  // (SampleRng::ForBatch), so the result is a function of the batch's
  // samples and its (seed, epoch, step, rank) alone.
  virtual absl::Status Apply(const BatchImages& batch,
                             SampleRng& rng) const = 0;
};

// What an op's factory builds. The order of the alternatives is the order
// of their kinds in a pipeline.
using AnyOp =
    std::variant<DecodeSpec, FieldSelection, std::unique_ptr<GeometryOp>,
                 std::unique_ptr<PixelOp>, std::unique_ptr<FormatOp>,
                 std::unique_ptr<TensorOp>, std::unique_ptr<BatchOp>>;

// The kind of op `op` holds.
OpKind KindOf(const AnyOp& op);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_OP_H_
