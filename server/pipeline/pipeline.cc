#include "server/pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/container/inlined_vector.h"
#include "absl/memory/memory.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "server/pipeline/passthrough.h"
#include "server/pipeline/sample_state.h"

namespace stoker::pipeline {

// The per-sample ops of a pipeline by kind, each list in config order;
// Create checks that the kinds come in this order, so running the lists one
// after another runs the ops in config order. Format ops are not here: they
// do not depend on the sample, and Create resolves them into the format.
struct PipelineSteps {
  // An op bound to the spatial field in `slot` (an index into decodes).
  template <typename Op>
  struct Bound {
    std::unique_ptr<Op> op;
    int slot = 0;
  };

  std::vector<DecodeSpec> decodes;
  std::vector<BoundSelection> selections;  // Used by Bind, not per sample.
  std::vector<std::unique_ptr<GeometryOp>> geometry;
  std::vector<Bound<PixelOp>> pixel;
  std::vector<Bound<TensorOp>> tensor;
  // At most one batch op: it owns the labels. Not a Bound<BatchOp>: clang 14
  // (the fuzz build's compiler) crashes in TBAA reading the slot of an
  // optional<Bound<BatchOp>>.
  std::unique_ptr<BatchOp> batch;
  int batch_slot = 0;  // Of the image it mixes, an index into decodes.
};


namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "pipeline 'train': op[2] 'resize' (line 14): " for error messages.
std::string OpContext(absl::string_view pipeline, size_t index,
                      const OpConfig& op) {
  return absl::StrCat(
      "pipeline '", pipeline, "': op[", index, "] '", op.name, "'",
      op.line > 0 ? absl::StrCat(" (line ", op.line, ")") : std::string(),
      ": ");
}

// An InvalidArgument (or `code`) error caused by op `index`.
absl::Status OpError(
    size_t index, std::string message,
    absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status status(code, message);
  status.SetPayload(kOpIndexPayload, absl::Cord(absl::StrCat(index)));
  return status;
}

// How order errors name the ops of `kind`.
absl::string_view KindPhrase(OpKind kind) {
  switch (kind) {
    case OpKind::kGeometry:
      return "geometry ops";
    case OpKind::kPixel:
      return "pixel ops";
    case OpKind::kFormat:
      return "normalize and layout";
    case OpKind::kTensor:
      return "tensor ops";
    case OpKind::kBatch:
      return "batch ops";
    default: {
      const std::string_view name = OpKindName(kind);
      return absl::string_view(name.data(), name.size());
    }
  }
}

// Why an op of `kind` cannot follow one of `previous` at `index`, or empty
// if it can.
std::string OrderProblem(size_t index, OpKind kind, OpKind previous,
                         bool decoded) {
  if (index == 0 && kind != OpKind::kDecode && kind != OpKind::kFields) {
    return "out of order: the first op must be decode_image (or, for a "
           "pipeline that decodes nothing, drop_fields or ragged_limit)";
  }
  if (index > 0 && kind == OpKind::kDecode && previous != OpKind::kDecode) {
    return "out of order: decode ops come first, before every other op";
  }
  if (!decoded && kind > OpKind::kFields) {
    return "out of order: a pipeline without decode_image passes its fields "
           "through and takes only drop_fields and ragged_limit";
  }
  if (kind >= previous) return "";
  absl::string_view why;
  if (previous == OpKind::kPixel) {
    why = ", which work on the image rendered from the final geometry";
  } else if (previous == OpKind::kTensor) {
    why = ", which work on the written output";
  } else if (previous == OpKind::kBatch) {
    why = ", which work on the collated batch";
  }
  return absl::StrCat("out of order: ", KindPhrase(kind), " must come before ",
                      KindPhrase(previous), why);
}

// The T at the start of `raw` (a little-endian host: passthrough.h).
template <typename T>
int64_t ReadLittleEndian(std::string_view raw) {
  T value;
  std::memcpy(&value, raw.data(), sizeof(value));
  return static_cast<int64_t>(value);
}

// The slot of the decode op that decodes `field`, or -1.
int SlotOf(const std::vector<DecodeSpec>& decodes, const std::string& field) {
  for (size_t i = 0; i < decodes.size(); ++i) {
    if (decodes[i].field == field) return static_cast<int>(i);
  }
  return -1;
}

// The format a decoded field is written in: the pipeline's for an image; a
// nearest field (class ids) stays uint8, in the pipeline's layout.
OutputFormat FieldFormat(const OutputFormat& format, const DecodeSpec& decode) {
  if (!decode.nearest) return format;
  OutputFormat ids;
  ids.layout = format.layout;
  return ids;
}

// DataLoss unless the spatial field in `slot` has the size of the first
// one, whose size the view was made from ("field 'mask' is 500x375,
// 'image' is 500x376"); Dataset::Read adds dataset, shard and key.
absl::Status CheckSameSize(SampleState& state,
                           const std::vector<DecodeSpec>& decodes, int slot) {
  const ImageDecoder* first = state.field(0).decoder;
  const ImageDecoder* decoder = state.field(slot).decoder;
  if (decoder->width() == first->width() &&
      decoder->height() == first->height()) {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat(
      "field '", decodes[slot].field, "' is ", decoder->width(), "x",
      decoder->height(), ", '", decodes[0].field, "' is ", first->width(), "x",
      first->height(), "; spatial fields of a sample must have one size"));
}

}  // namespace

std::optional<size_t> FailedOpIndex(const absl::Status& status) {
  const auto payload = status.GetPayload(kOpIndexPayload);
  size_t index = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &index)) {
    return std::nullopt;
  }
  return index;
}

namespace {

std::vector<tensor::TensorSpec> SpecsOf(
    const std::vector<tensor::OutputSlot>& slots) {
  std::vector<tensor::TensorSpec> specs;
  for (const tensor::OutputSlot& slot : slots) specs.push_back(slot.spec);
  return specs;
}

}  // namespace

InputField InputField::Image(std::string name, uint64_t max_length) {
  InputField field;
  field.name = std::move(name);
  field.passthrough = Passthrough::kRaggedBytes;
  field.spatial = true;
  field.shape = {-1};
  field.max_length = max_length;
  return field;
}

InputField InputField::Dense(std::string name, tensor::DType dtype,
                             std::vector<int64_t> shape) {
  InputField field;
  field.name = std::move(name);
  field.dtype = dtype;
  field.shape = std::move(shape);
  return field;
}

BoundPipeline::BoundPipeline(std::shared_ptr<const PipelineSteps> steps,
                             const OutputFormat& format,
                             int64_t max_decode_pixels, size_t num_fields,
                             std::vector<size_t> image_fields,
                             std::vector<PassthroughField> passthrough,
                             std::vector<tensor::OutputSlot> slots,
                             std::optional<BatchBinding> batch)
    : steps_(std::move(steps)),
      converter_(format),
      ids_converter_(FieldFormat(format, DecodeSpec{"", true})),
      max_decode_pixels_(max_decode_pixels),
      num_fields_(num_fields),
      image_fields_(std::move(image_fields)),
      passthrough_(std::move(passthrough)),
      slots_(std::move(slots)),
      outputs_(SpecsOf(slots_)),
      batch_(batch) {}

BoundPipeline::~BoundPipeline() = default;

const PixelConverter& BoundPipeline::ConverterOf(int slot) const {
  return steps_->decodes[slot].nearest ? ids_converter_ : converter_;
}

absl::Status BoundPipeline::Run(absl::Span<const std::string_view> fields,
                                SampleRng& rng, absl::Span<uint8_t* const> dst,
                                StageTimes* times) const {
  if (fields.size() != num_fields_ || dst.size() != outputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline run got ", fields.size(), " fields and ",
                     dst.size(), " buffers; the schema has ", num_fields_,
                     " fields and ", outputs_.size(), " outputs"));
  }
  const int64_t start_ns = times != nullptr ? NowNs() : 0;
  const int num_images = static_cast<int>(image_fields_.size());
  const std::vector<DecodeSpec>& decodes = steps_->decodes;
  DecoderSet decoders(max_decode_pixels_);
  SampleState state(num_images);
  for (int slot = 0; slot < num_images; ++slot) {
    ImageField& field = state.field(slot);
    field.encoded = fields[image_fields_[slot]];
    absl::StatusOr<ImageDecoder*> decoder = decoders.Open(field.encoded);
    if (!decoder.ok()) return decoder.status();
    field.decoder = *decoder;
    if (slot == 0) {
      state.view() = FullView(field.decoder->width(), field.decoder->height());
    } else if (absl::Status s = CheckSameSize(state, decodes, slot); !s.ok()) {
      return s;
    }
  }
  for (const std::unique_ptr<GeometryOp>& op : steps_->geometry) {
    if (absl::Status s = op->Apply(state.view(), rng); !s.ok()) return s;
  }
  // Sniffing and header parsing count as decode.
  if (times != nullptr) times->decode_ns += NowNs() - start_ns;

  const View& view = state.view();
  absl::InlinedVector<RenderBuffers, 1> buffers(num_images);
  for (int slot = 0; slot < num_images; ++slot) {
    ImageField& field = state.field(slot);
    // A uint8 HWC output is the rendered image itself: render into it.
    absl::StatusOr<ImageBuffer> rendered =
        RenderView(view, field.decoder,
                   ConverterOf(slot).is_passthrough() ? dst[slot] : nullptr,
                   &buffers[slot], times, decodes[slot].nearest);
    if (!rendered.ok()) return rendered.status();
    field.rendered = *rendered;
    field.flip_pending = view.flip;
  }
  if (!steps_->pixel.empty()) {
    const int64_t pixel_ns = times != nullptr ? NowNs() : 0;
    // With several spatial fields a positional op moves them all.
    absl::InlinedVector<SpatialImage, 1> spatial;
    if (num_images > 1) {
      for (int slot = 0; slot < num_images; ++slot) {
        spatial.push_back({state.field(slot).rendered, decodes[slot].nearest,
                           decodes[slot].fill});
      }
    }
    for (const PipelineSteps::Bound<PixelOp>& step : steps_->pixel) {
      if (!step.op->flip_invariant()) {
        // The flip is one for all fields: mirror each before the op.
        for (ImageField& field : state.spatial()) {
          if (!field.flip_pending) continue;
          MirrorInPlace(field.rendered);
          field.flip_pending = false;
        }
      }
      const absl::Status s =
          num_images > 1
              ? step.op->Apply(PixelTargets(spatial, step.slot), rng)
              : step.op->Apply(PixelTargets(state.field(0).rendered), rng);
      if (!s.ok()) return s;
    }
    if (times != nullptr) times->augment_ns += NowNs() - pixel_ns;
  }
  for (int slot = 0; slot < num_images; ++slot) {
    const ImageField& field = state.field(slot);
    WriteRendered(field.rendered, field.flip_pending, ConverterOf(slot),
                  dst[slot], times);
  }
  if (!steps_->tensor.empty()) {
    const int64_t tensor_ns = times != nullptr ? NowNs() : 0;
    const OutputFormat& format = converter_.format();
    for (const PipelineSteps::Bound<TensorOp>& step : steps_->tensor) {
      const TensorRef out{dst[step.slot],  format.dtype,   format.layout,
                          view.out_height, view.out_width, 3};
      if (absl::Status s = step.op->Apply(out, rng); !s.ok()) return s;
    }
    if (times != nullptr) times->augment_ns += NowNs() - tensor_ns;
  }

  if (!passthrough_.empty()) {
    const int64_t collate_ns = times != nullptr ? NowNs() : 0;
    if (absl::Status s = CopyPassthrough(passthrough_, fields, dst); !s.ok()) {
      return s;
    }
    if (times != nullptr) times->collate_ns += NowNs() - collate_ns;
  }
  if (batch_.has_value()) {
    return WriteSoftLabel(fields[batch_->label_field],
                          reinterpret_cast<float*>(dst[batch_->soft_slot]));
  }
  return absl::OkStatus();
}

absl::Status BoundPipeline::WriteSoftLabel(std::string_view raw,
                                           float* soft) const {
  const SoftLabels& labels = steps_->batch->soft_labels();
  const size_t size = tensor::DTypeSize(batch_->label_dtype);
  if (raw.size() != size) {
    return absl::DataLossError(absl::StrCat(
        "label field '", labels.label, "' holds ", raw.size(),
        " bytes, not one ", std::string(tensor::DTypeName(batch_->label_dtype))));
  }
  int64_t label = 0;
  switch (batch_->label_dtype) {
    case tensor::DType::kInt64:
      label = ReadLittleEndian<int64_t>(raw);
      break;
    case tensor::DType::kInt32:
      label = ReadLittleEndian<int32_t>(raw);
      break;
    case tensor::DType::kInt16:
      label = ReadLittleEndian<int16_t>(raw);
      break;
    case tensor::DType::kUint16:
      label = ReadLittleEndian<uint16_t>(raw);
      break;
    case tensor::DType::kInt8:
      label = ReadLittleEndian<int8_t>(raw);
      break;
    default:  // kUint8; Bind admits integer dtypes only.
      label = ReadLittleEndian<uint8_t>(raw);
      break;
  }
  if (label < 0 || label >= labels.num_classes) {
    return absl::DataLossError(absl::StrCat(
        "label ", label, " of field '", labels.label, "' is outside [0, ",
        labels.num_classes, "), the batch op's num_classes"));
  }
  // timm's one-hot: off and on computed in double, stored as float32.
  const double off = labels.smoothing / labels.num_classes;
  std::fill(soft, soft + labels.num_classes, static_cast<float>(off));
  soft[label] = static_cast<float>(1.0 - labels.smoothing + off);
  return absl::OkStatus();
}

absl::Status BoundPipeline::RunBatch(absl::Span<uint8_t* const> tensors,
                                     uint32_t size, SampleRng& rng) const {
  if (!batch_.has_value()) return absl::OkStatus();
  if (tensors.size() != outputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch run got ", tensors.size(), " tensors; the "
                     "pipeline has ", outputs_.size(), " outputs"));
  }
  const BatchOp& op = *steps_->batch;
  const OutputFormat& format = converter_.format();
  BatchImages batch;
  batch.image = {tensors[batch_->image_slot], format.dtype, format.layout,
                 batch_->height, batch_->width, 3};
  batch.size = size;
  batch.soft = reinterpret_cast<float*>(tensors[batch_->soft_slot]);
  batch.num_classes = op.soft_labels().num_classes;
  return op.Apply(batch, rng);
}

Pipeline::Pipeline(std::string name, std::vector<std::string> op_names,
                   std::shared_ptr<const PipelineSteps> steps,
                   const OutputFormat& format, int out_height, int out_width,
                   int64_t max_decode_pixels)
    : name_(std::move(name)),
      op_names_(std::move(op_names)),
      steps_(std::move(steps)),
      format_(format),
      out_height_(out_height),
      out_width_(out_width),
      max_decode_pixels_(max_decode_pixels) {}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    std::string name, const std::vector<OpConfig>& configs,
    int64_t max_decode_pixels) {
  if (configs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline '", name, "' has no ops; it must start with decode_image"));
  }
  auto steps = std::make_shared<PipelineSteps>();
  std::vector<std::string> op_names;
  OpKind previous = OpKind::kDecode;
  SizeEffect size;
  OutputFormat format;
  for (size_t i = 0; i < configs.size(); ++i) {
    const OpConfig& config = configs[i];
    const std::string context = OpContext(name, i, config);
    const OpDef* def = OpRegistry::Global().Find(config.name);
    if (def == nullptr) {
      return OpError(
          i, absl::StrCat(context, "unknown op; known ops: ",
                          absl::StrJoin(OpRegistry::Global().Names(), ", ")));
    }
    absl::StatusOr<OpArgs> args = ResolveArgs(*def, config.args);
    if (!args.ok()) {
      return OpError(i, absl::StrCat(context, args.status().message()));
    }
    absl::StatusOr<AnyOp> op = def->factory(*args);
    if (!op.ok()) {
      return OpError(i, absl::StrCat(context, op.status().message()));
    }
    const OpKind kind = KindOf(*op);
    if (kind != def->kind) {
      // The registration and the op disagree: a bug, not a config mistake.
      return OpError(i,
                     absl::StrCat(context, "registered as a ",
                                  std::string(OpKindName(def->kind)),
                                  " op, but its factory built a ",
                                  std::string(OpKindName(kind)), " op"),
                     absl::StatusCode::kInternal);
    }
    if (const std::string problem =
            OrderProblem(i, kind, previous, !steps->decodes.empty());
        !problem.empty()) {
      return OpError(i, absl::StrCat(context, problem));
    }
    previous = kind;
    // The spatial field a pixel or tensor op works on: one that a decode op
    // before it decodes (Register made these ops bind a field).
    int slot = 0;
    if (kind == OpKind::kPixel || kind == OpKind::kTensor ||
        kind == OpKind::kBatch) {
      const std::string& field = *FindArg<std::string>(*args, kFieldArg);
      slot = SlotOf(steps->decodes, field);
      if (slot < 0) {
        return OpError(i, absl::StrCat(context, "field '", field,
                                       "' is not decoded by any decode op"));
      }
      if (steps->decodes[slot].nearest) {
        return OpError(
            i, absl::StrCat(context, "field '", field,
                            "' is decoded with interpolation: nearest (class "
                            "ids), which pixel and tensor ops do not work on; "
                            "bind the op to an image field (a warp bound to "
                            "the image moves the mask with it)"));
      }
    }
    if (kind == OpKind::kBatch && steps->batch != nullptr) {
      return OpError(i, absl::StrCat(context,
                                     "a pipeline takes one batch op (both "
                                     "would write the soft labels); use "
                                     "mixup_cutmix for MixUp and CutMix"));
    }
    absl::Status status = std::visit(
        [&](auto& alternative) -> absl::Status {
          using T = std::decay_t<decltype(alternative)>;
          if constexpr (std::is_same_v<T, DecodeSpec>) {
            if (SlotOf(steps->decodes, alternative.field) >= 0) {
              return absl::InvalidArgumentError(
                  absl::StrCat("field '", alternative.field,
                               "' is already decoded by an earlier decode op"));
            }
            size = {SizeEffect::kVaries};
            steps->decodes.push_back(std::move(alternative));
          } else if constexpr (std::is_same_v<T, FieldSelection>) {
            steps->selections.push_back({std::move(alternative), context});
          } else if constexpr (std::is_same_v<T, std::unique_ptr<GeometryOp>>) {
            const SizeEffect effect = alternative->size_effect();
            if (effect.kind != SizeEffect::kKeeps) size = effect;
            steps->geometry.push_back(std::move(alternative));
          } else if constexpr (std::is_same_v<T, std::unique_ptr<PixelOp>>) {
            steps->pixel.push_back({std::move(alternative), slot});
          } else if constexpr (std::is_same_v<T, std::unique_ptr<FormatOp>>) {
            alternative->Apply(format);
          } else if constexpr (std::is_same_v<T, std::unique_ptr<TensorOp>>) {
            // Format ops come before tensor ops, so `format` is final here.
            if (absl::Status s = alternative->Check(format); !s.ok()) return s;
            steps->tensor.push_back({std::move(alternative), slot});
          } else {
            if (absl::Status s = alternative->Check(format); !s.ok()) return s;
            steps->batch = std::move(alternative);
            steps->batch_slot = slot;
          }
          return absl::OkStatus();
        },
        *op);
    if (!status.ok()) {
      return OpError(i, absl::StrCat(context, status.message()));
    }
    op_names.push_back(config.name);
  }
  if (!steps->decodes.empty() && size.kind != SizeEffect::kFixes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline '", name,
        "': the output size is not fixed; end the geometry ops with "
        "random_resized_crop, center_crop or resize [h, w]"));
  }
  if (absl::Status s = PixelConverter::Check(format); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline '", name, "': ", s.message()));
  }
  return absl::WrapUnique(new Pipeline(std::move(name), std::move(op_names),
                                       std::move(steps), format, size.height,
                                       size.width, max_decode_pixels));
}

absl::StatusOr<BatchBinding> Pipeline::BindBatch(
    absl::Span<const InputField> schema, const SoftLabels& labels,
    std::vector<tensor::OutputSlot>* slots) const {
  using tensor::DType;
  const std::string soft_name = absl::StrCat(labels.label, "_soft");
  for (const tensor::OutputSlot& slot : *slots) {
    if (slot.spec.name == soft_name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline '", name_, "': the batch op's soft labels '", soft_name,
          "' would have the name of another output; drop that field"));
    }
  }
  for (size_t i = 0; i < schema.size(); ++i) {
    const InputField& field = schema[i];
    if (field.name != labels.label) continue;
    const bool integer =
        field.dtype == DType::kInt64 || field.dtype == DType::kInt32 ||
        field.dtype == DType::kInt16 || field.dtype == DType::kInt8 ||
        field.dtype == DType::kUint16 || field.dtype == DType::kUint8;
    if (field.passthrough != InputField::Passthrough::kDense ||
        !field.shape.empty() || !integer) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline '", name_, "': the batch op's label field '",
          labels.label, "' must be an integer scalar, not ",
          std::string(tensor::DTypeName(field.dtype)), " of shape [",
          absl::StrJoin(field.shape, ", "), "]"));
    }
    BatchBinding binding;
    binding.label_field = i;
    binding.label_dtype = field.dtype;
    binding.soft_slot = slots->size();
    slots->push_back(tensor::OutputSlot::Dense(
        {soft_name, DType::kFloat32, {labels.num_classes}}));
    return binding;
  }
  std::vector<absl::string_view> names;
  for (const InputField& field : schema) names.push_back(field.name);
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline '", name_, "': the batch op's label field '", labels.label,
      "' is not in the dataset; its fields: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<std::unique_ptr<BoundPipeline>> Pipeline::Bind(
    absl::Span<const InputField> schema) const {
  std::vector<size_t> image_fields;
  std::vector<bool> bound(schema.size(), false);
  std::vector<tensor::OutputSlot> slots;
  for (const DecodeSpec& decode : steps_->decodes) {
    size_t index = schema.size();
    for (size_t i = 0; i < schema.size(); ++i) {
      // An image, or a bytes field of a dataset packed before kinds said
      // which bytes are images.
      const bool encoded =
          schema[i].spatial ||
          (schema[i].passthrough == InputField::Passthrough::kRaggedBytes &&
           !schema[i].utf8);
      if (encoded && schema[i].name == decode.field) index = i;
    }
    if (index == schema.size()) {
      std::vector<absl::string_view> names;
      for (const InputField& field : schema) names.push_back(field.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline '", name_, "' needs an image field named '", decode.field,
          "'; the dataset has: ", absl::StrJoin(names, ", ")));
    }
    image_fields.push_back(index);
    bound[index] = true;
    const OutputFormat format = FieldFormat(format_, decode);
    slots.push_back(tensor::OutputSlot::Dense(
        {decode.field, format.dtype,
         ImageShape(format, out_height_, out_width_)}));
  }
  std::vector<PassthroughField> passthrough;
  if (absl::Status s = BindPassthrough(schema, bound, steps_->selections,
                                       &slots, &passthrough);
      !s.ok()) {
    return s;
  }
  std::optional<BatchBinding> batch;
  if (steps_->batch != nullptr) {
    absl::StatusOr<BatchBinding> binding =
        BindBatch(schema, steps_->batch->soft_labels(), &slots);
    if (!binding.ok()) return binding.status();
    batch = *binding;
    // Decode i writes output i (the loop above).
    batch->image_slot = static_cast<size_t>(steps_->batch_slot);
    batch->height = out_height_;
    batch->width = out_width_;
  }
  return absl::WrapUnique(new BoundPipeline(
      steps_, format_, max_decode_pixels_, schema.size(),
      std::move(image_fields), std::move(passthrough), std::move(slots),
      batch));
}

}  // namespace stoker::pipeline
