// Pipeline: a named, checked list of ops from the config; BoundPipeline: a
// pipeline applied to one dataset's record schema, which turns a record's
// fields into a sample's output tensors.
//
// Per sample, Run reads the image's header, hands the geometry ops the
// sample's View and generator, renders the view once (image_plan.h), runs
// the pixel ops on the rendered image, writes it into the caller's buffer,
// (with several decoded spatial fields, an image and its mask: each of
// them, from the one View, after checking they have one size; warps move
// them all, colour ops only the field they name),
// runs the tensor ops there, and copies every field that no op binds (a
// label, a token array, a caption) into its slot after it: the pass-through
// (passthrough.h). Format ops (normalize, layout) do not depend on the
// sample; Create resolves them once (op.h has the kinds of op).
//
// The rendered image lives where it costs no copy (docs/pipeline-design.md
// §2.2): for a uint8 HWC output it is rendered straight into the caller's
// buffer, and pixel ops work there; otherwise in the temporary the
// conversion reads from anyway. The view's flip is applied as the image is
// written, unless a pixel op that does not commute with it comes first.
//
// A pipeline with views (docs/pipeline-design.md §4.4) runs that for each
// instance of each view, each with its own View and generator, after its
// shared decode ops; the image is decoded once for all of them
// (RenderViews).
//
// Example config and outputs:
//   train: [decode_jpeg, {random_resized_crop: {size: 224}}, random_flip,
//           {normalize: {mean: [...], std: [...]}}, {layout: chw}]
//   schema (image: image, label: int64, tokens: ndarray int32 [-1])
//   -> outputs image float32 [3, 224, 224], label int64 [],
//      tokens int32 [-1] (ragged values), tokens.offsets int64.
//   dino: {decode: [decode_image],
//          views: {global: {count: 2, ops: [{random_resized_crop: ...}]},
//                  local: {count: 6, ops: [...]}}}
//   -> global.0.image, global.1.image, local.0.image ... local.5.image,
//      then label.
//
// A pipeline can also be bound to stop before its format stage
// (BindMode::kRendered): every decoded image is then written as its uint8
// HWC rendering, flip applied, and the tensor and batch ops do not run. A
// helper daemon sends that (a quarter of float32's bytes), and the node's
// own bound pipeline finishes it with FormatRendered and RunBatch, byte
// for byte as if it had run the sample itself (docs/remote-design.md §1.2).
//
// Thread-safety: Pipeline and BoundPipeline are immutable after creation;
// Bind and Run may be called from many threads at once.
#ifndef STOKER_SERVER_PIPELINE_PIPELINE_H_
#define STOKER_SERVER_PIPELINE_PIPELINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/pipeline/image_plan.h"
#include "server/pipeline/op.h"
#include "server/pipeline/pixel_convert.h"
#include "server/pipeline/registry.h"
#include "server/pipeline/sample_rng.h"
#include "server/tensor/output_slot.h"
#include "server/tensor/tensor_spec.h"

namespace stoker::pipeline {

// The ops of a created pipeline, sorted by kind (pipeline_steps.h).
struct PipelineSteps;
// One field a bound pipeline copies into the batch (passthrough.h).
struct PassthroughField;

// The Status payload, under this type URL, that Pipeline::Create puts on an
// error caused by one op: the op's index in the config, in decimal.
inline constexpr char kOpIndexPayload[] = "stoker.op_index";

// The index in kOpIndexPayload, or nullopt when `status` has none.
std::optional<size_t> FailedOpIndex(const absl::Status& status);

// One op as the config loader read it: arguments type-checked against the
// registry, defaults not yet filled. line is the YAML line, 0 if unknown.
struct OpConfig {
  std::string name;
  OpArgs args;
  int line = 0;
};

// The most instances one view may have, and views one pipeline.
inline constexpr int kMaxViewCount = 64;
inline constexpr size_t kMaxViews = 16;

// One view of a pipeline with views: `count` instances of `ops`, each
// drawing its own random choices. Its outputs are "<name>.<field>", or
// "<name>.<k>.<field>" (k from 0) when count > 1.
struct ViewConfig {
  std::string name;  // Letters, digits, '_' and '-'.
  int count = 1;
  std::vector<OpConfig> ops;
  int line = 0;
};

// A pipeline as the config gives it. The list form has `ops` only: one
// unnamed view of one instance, whose outputs are named after their fields.
// The map form has views, and `ops` holds its decode and fields ops, shared
// by every view (decode_image when empty).
struct PipelineConfig {
  std::vector<OpConfig> ops;
  std::vector<ViewConfig> views;
};

// One field of a dataset's records, in record order, as the pipeline layer
// sees it; service::InputSchema converts a manifest's fields, so that
// pipeline/ never sees dataset/. Every value is little-endian.
struct InputField {
  // How the field reaches the batch when no op binds it: one tensor of
  // `shape` (scalars: {}), or ragged values + offsets, counted in rows of
  // prod(shape[1:]) elements (ndarray) or in bytes (image, bytes, str).
  enum class Passthrough { kDense, kRaggedRows, kRaggedBytes };

  std::string name;
  Passthrough passthrough = Passthrough::kDense;
  bool spatial = false;  // An encoded image: decode_image may bind it.
  tensor::DType dtype = tensor::DType::kUint8;
  std::vector<int64_t> shape;  // Ragged: {-1, trailing...}.
  uint64_t max_length = 0;     // Ragged: the manifest's; 0 unknown.
  bool utf8 = false;           // A str field.

  // An encoded image field (uint8 {-1}), as a v1 dataset's `image`.
  static InputField Image(std::string name, uint64_t max_length = 0);
  // A dense field: a scalar (shape {}) or a fixed-shape array.
  static InputField Dense(std::string name, tensor::DType dtype,
                          std::vector<int64_t> shape = {});
};

// How a bound pipeline's batch op finds its labels and soft labels.
struct BatchBinding {
  size_t label_field = 0;  // Record field of the labels.
  tensor::DType label_dtype = tensor::DType::kInt64;
  size_t soft_slot = 0;  // Output slot of the soft labels.
  size_t image_slot = 0;  // Output slot of the image it mixes.
  int height = 0, width = 0;  // Of the image output.
};

// What a bound pipeline writes (Pipeline::Bind).
enum class BindMode {
  kOutput,    // Every op: the outputs as the config says.
  kRendered,  // Stop before the format stage (see above).
};

class BoundPipeline {
 public:
  ~BoundPipeline();

  // Per sample: each decoded image, in decode op order and named after its
  // field (a nearest field as uint8 in the pipeline's layout, whatever
  // normalize says), once per view instance (in view order, then instance
  // order, each named as ViewConfig says), then each pass-through field in
  // schema order (ragged ones as values, then "<name>.offsets").
  const std::vector<tensor::TensorSpec>& outputs() const { return outputs_; }
  // The outputs with what each takes in a batch (service::BatchLayout).
  const std::vector<tensor::OutputSlot>& slots() const { return slots_; }

  // Turns one record's `fields` (in schema order) into the outputs: output
  // i goes to dst[i], which is aligned for its dtype and has room for
  // slots()[i].max_sample_bytes (an offsets slot: one int64, which Run
  // sets to the sample's rows or bytes). Adds stage times to *times when
  // not null. DataLoss for an undecodable image or a field of the wrong
  // size; for a ragged value over its ragged_limit, as the limit's
  // overflow says (see RaggedOverflowOf); InvalidArgument for a wrong
  // number of fields or buffers. Spatial fields of different sizes are
  // DataLoss naming both ("field 'mask' is 200x151, 'image' is 200x150").
  //
  // With a batch op, Run also writes the sample's smoothed one-hot into
  // its soft labels (the last output, "<label>_soft"), and a label outside
  // [0, num_classes) is DataLoss.
  absl::Status Run(absl::Span<const std::string_view> fields, SampleRng& rng,
                   absl::Span<uint8_t* const> dst, StageTimes* times) const;

  // Whether RunBatch does anything: the pipeline has a batch op (mixup,
  // cutmix, mixup_cutmix) and is not bound kRendered.
  bool has_batch_op() const { return batch_.has_value() && !rendered_; }

  // Whether a kRendered bind of this pipeline can be finished here: no
  // tensor op (random_erasing), which works on the formatted tensor with
  // the sample's generator where the pixel ops left it.
  bool can_finish_rendered() const { return can_finish_rendered_; }
  // The slots a kRendered bind of this pipeline has: slots() with each
  // decoded image output (the first num_image_outputs()) as uint8 HWC.
  std::vector<tensor::OutputSlot> RenderedSlots() const;
  // Outputs [0, num_image_outputs()) are the decoded images; the rest are
  // passed through alike by both binds.
  size_t num_image_outputs() const {
    return instance_views_.size() * image_fields_.size();
  }
  // Writes one sample's image output `output` from its uint8 HWC rendering
  // at `src` (RenderedSlots()[output]) into `dst` in this bind's format:
  // what Run writes there. REQUIRES: output < num_image_outputs(), dst is
  // aligned for the output's dtype.
  void FormatRendered(size_t output, const uint8_t* src, uint8_t* dst) const;

  // Runs the batch op, if any, on a collated batch of `size` samples:
  // tensors[t] is where output t's batch tensor starts, its samples back
  // to back (service::FinishBatch's result). `rng` is the batch's
  // generator (SampleRng::ForBatch).
  absl::Status RunBatch(absl::Span<uint8_t* const> tensors, uint32_t size,
                        SampleRng& rng) const;

 private:
  friend class Pipeline;

  BoundPipeline(std::shared_ptr<const PipelineSteps> steps, bool rendered,
                int64_t max_decode_pixels, size_t num_fields,
                std::vector<size_t> image_fields,
                std::vector<PassthroughField> passthrough,
                std::vector<tensor::OutputSlot> slots,
                std::optional<BatchBinding> batch);

  // The sample's one-hot, smoothed, from its label's bytes `raw`.
  absl::Status WriteSoftLabel(std::string_view raw, float* soft) const;

  // A view's converters: of its images, and of its nearest fields (uint8,
  // same layout). Bound kRendered, both write uint8 HWC.
  struct Converters {
    PixelConverter image, ids;
  };
  const PixelConverter& ConverterOf(int view, int slot) const;

  // Shared with the Pipeline, so that a bound pipeline stays valid when
  // the config that made it is reloaded and the Pipeline destroyed.
  const std::shared_ptr<const PipelineSteps> steps_;
  const bool rendered_;  // Bound kRendered.
  const bool can_finish_rendered_;
  const std::vector<Converters> converters_;  // One per view.
  // The view of each instance, in output order.
  const std::vector<int> instance_views_;
  const int64_t max_decode_pixels_;
  const size_t num_fields_;
  // The record field of each decoded image, in decode op order.
  const std::vector<size_t> image_fields_;
  const std::vector<PassthroughField> passthrough_;
  const std::vector<tensor::OutputSlot> slots_;
  const std::vector<tensor::TensorSpec> outputs_;
  const std::optional<BatchBinding> batch_;
};

class Pipeline {
 public:
  // Builds the ops named in `ops` from OpRegistry::Global(). InvalidArgument
  // naming the pipeline, the op, its index and its line (when > 0) for an
  // unknown op, bad arguments, an op out of order (decode ops first, at most
  // one per field, then
  // fields ops (drop_fields, ragged_limit), geometry, pixel, format
  // (normalize, layout), tensor ops and at most one batch op (mixup, cutmix,
  // mixup_cutmix); a pipeline of fields ops alone
  // decodes nothing and passes every field through), a pixel or
  // tensor op bound to a field no decode op decodes or to one decoded with
  // interpolation: nearest (a mask), or an output size that
  // is not fixed (the geometry ops must end with random_resized_crop,
  // center_crop or resize [h, w]). An image over `max_decode_pixels` (width x
  // height, read from its header; limits.max_decode_pixels) is DataLoss. An
  // error that one op causes carries that op's index in `ops` (see
  // FailedOpIndex), so the config loader can point at the op.
  //
  // With views, `config.ops` takes decode and fields ops only, and each
  // view geometry, pixel, format and tensor ops, in that order, ending in a
  // fixed size; batch ops need the list form. Op indices (FailedOpIndex)
  // count config.ops first, then each view's ops in order. A view name
  // that is empty, repeated or has characters other than letters, digits,
  // '_' and '-', a count outside 1..kMaxViewCount, or more than kMaxViews
  // views is InvalidArgument.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(
      std::string name, const PipelineConfig& config,
      int64_t max_decode_pixels = kDefaultMaxDecodePixels);
  // The list form.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(
      std::string name, const std::vector<OpConfig>& ops,
      int64_t max_decode_pixels = kDefaultMaxDecodePixels);

  const std::string& name() const { return name_; }
  // Its ops, arguments, views and decode limit as one line of text
  // (pipeline_definition.h): equal for two pipelines that make the same
  // batches.
  const std::string& definition() const { return definition_; }
  // The op names in config order; a view's as "<view>.<op>".
  std::vector<std::string> op_names() const { return op_names_; }

  // The image output's format and size (0 x 0 without a decode op); of the
  // first view in a pipeline with views.
  const OutputFormat& format() const;
  int out_height() const;
  int out_width() const;

  // Applies the pipeline to records of `schema`; the image is the spatial
  // field that decode_image names ("image" by default); every other field
  // passes through unless drop_fields names it. InvalidArgument, naming the
  // op and its line, when there is no such image, drop_fields or
  // ragged_limit names a field the schema lacks (or, for ragged_limit, one
  // that is not ragged), or a ragged field has neither a ragged_limit nor a
  // max_length in the schema.
  //
  // A ragged field's slot holds ragged_limit's max_length if given, else
  // the schema's. Only ragged_limit's overflow applies to longer values:
  // the dataset's reader already refuses a value over the manifest's.
  //
  // A batch op adds the output "<label>_soft" (float32 [num_classes])
  // after the others; InvalidArgument when its label field is missing or
  // not an integer scalar.
  //
  // Bound kRendered, the image outputs are uint8 HWC (see BindMode);
  // FailedPrecondition, naming the op, when a tensor op forbids it.
  absl::StatusOr<std::unique_ptr<BoundPipeline>> Bind(
      absl::Span<const InputField> schema,
      BindMode mode = BindMode::kOutput) const;

 private:
  // The soft labels' slot, appended to `slots`, and where the labels are.
  absl::StatusOr<BatchBinding> BindBatch(
      absl::Span<const InputField> schema, const SoftLabels& labels,
      std::vector<tensor::OutputSlot>* slots) const;

  Pipeline(std::string name, std::vector<std::string> op_names,
           std::shared_ptr<const PipelineSteps> steps,
           int64_t max_decode_pixels, std::string definition);

  const std::string name_;
  const std::vector<std::string> op_names_;
  const std::shared_ptr<const PipelineSteps> steps_;
  const int64_t max_decode_pixels_;
  const std::string definition_;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_PIPELINE_H_
