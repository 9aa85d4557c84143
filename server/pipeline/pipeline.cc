#include "server/pipeline/pipeline.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/base/clock.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "server/pipeline/passthrough.h"
#include "server/pipeline/pipeline_steps.h"
#include "server/pipeline/sample_state.h"

namespace stoker::pipeline {
namespace {

// The T at the start of `raw` (a little-endian host: passthrough.h).
template <typename T>
int64_t ReadLittleEndian(std::string_view raw) {
  T value;
  std::memcpy(&value, raw.data(), sizeof(value));
  return static_cast<int64_t>(value);
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

namespace {

std::vector<tensor::TensorSpec> SpecsOf(
    const std::vector<tensor::OutputSlot>& slots) {
  std::vector<tensor::TensorSpec> specs;
  for (const tensor::OutputSlot& slot : slots) specs.push_back(slot.spec);
  return specs;
}

}  // namespace

namespace {

// The view of each instance of `steps`, in output order.
std::vector<int> InstanceViews(const PipelineSteps& steps) {
  std::vector<int> views;
  for (size_t v = 0; v < steps.views.size(); ++v) {
    views.insert(views.end(), steps.views[v].count, static_cast<int>(v));
  }
  return views;
}

// Whether every view of `steps` is done once its images are formatted.
bool NoTensorOps(const PipelineSteps& steps) {
  for (const PipelineSteps::View& view : steps.views) {
    if (!view.tensor.empty()) return false;
  }
  return true;
}

}  // namespace

BoundPipeline::BoundPipeline(std::shared_ptr<const PipelineSteps> steps,
                             bool rendered, int64_t max_decode_pixels,
                             size_t num_fields,
                             std::vector<size_t> image_fields,
                             std::vector<PassthroughField> passthrough,
                             std::vector<tensor::OutputSlot> slots,
                             std::optional<BatchBinding> batch)
    : steps_(std::move(steps)),
      rendered_(rendered),
      can_finish_rendered_(NoTensorOps(*steps_)),
      converters_([this] {
        std::vector<Converters> converters;
        for (const PipelineSteps::View& view : steps_->views) {
          const OutputFormat format = rendered_ ? OutputFormat{} : view.format;
          converters.push_back(
              {PixelConverter(format),
               PixelConverter(
                   FieldFormat(format, DecodeSpec{"", true, std::nullopt}))});
        }
        return converters;
      }()),
      instance_views_(InstanceViews(*steps_)),
      max_decode_pixels_(max_decode_pixels),
      num_fields_(num_fields),
      image_fields_(std::move(image_fields)),
      passthrough_(std::move(passthrough)),
      slots_(std::move(slots)),
      outputs_(SpecsOf(slots_)),
      batch_(batch) {}

BoundPipeline::~BoundPipeline() = default;

const PixelConverter& BoundPipeline::ConverterOf(int view, int slot) const {
  const Converters& converters = converters_[view];
  return steps_->decodes[slot].nearest ? converters.ids : converters.image;
}

std::vector<tensor::OutputSlot> BoundPipeline::RenderedSlots() const {
  std::vector<tensor::OutputSlot> slots = slots_;
  const size_t num_images = image_fields_.size();
  for (size_t output = 0; output < num_image_outputs(); ++output) {
    const PipelineSteps::View& view =
        steps_->views[instance_views_[output / num_images]];
    slots[output] = tensor::OutputSlot::Dense(
        {slots_[output].spec.name, tensor::DType::kUint8,
         ImageShape(OutputFormat{}, view.out_height, view.out_width), {},
         false});
  }
  return slots;
}

void BoundPipeline::FormatRendered(size_t output, const uint8_t* src,
                                   uint8_t* dst) const {
  const size_t num_images = image_fields_.size();
  const int v = instance_views_[output / num_images];
  const PipelineSteps::View& view = steps_->views[v];
  // The rendering has the flip applied already.
  ConverterOf(v, static_cast<int>(output % num_images))
      .Convert(src, static_cast<size_t>(view.out_width) * 3, view.out_width,
               view.out_height, /*flip=*/false, dst);
}

namespace {

// Runs `view`'s pixel ops on the rendered fields of `instance`.
absl::Status RunPixelOps(const PipelineSteps::View& view,
                         const std::vector<DecodeSpec>& decodes,
                         SampleState& state, int instance, SampleRng& rng,
                         StageTimes* times) {
  if (view.pixel.empty()) return absl::OkStatus();
  const int64_t pixel_ns = times != nullptr ? NowNs() : 0;
  const int num_images = static_cast<int>(decodes.size());
  // With several spatial fields a positional op moves them all.
  absl::InlinedVector<SpatialImage, 1> spatial;
  if (num_images > 1) {
    for (int slot = 0; slot < num_images; ++slot) {
      spatial.push_back({state.rendered(instance, slot).image,
                         decodes[slot].nearest, decodes[slot].fill});
    }
  }
  for (const PipelineSteps::Bound<PixelOp>& step : view.pixel) {
    if (!step.op->flip_invariant()) {
      // The flip is one for all fields: mirror each before the op.
      for (int slot = 0; slot < num_images; ++slot) {
        RenderedField& field = state.rendered(instance, slot);
        if (!field.flip_pending) continue;
        MirrorInPlace(field.image);
        field.flip_pending = false;
      }
    }
    const absl::Status s =
        num_images > 1
            ? step.op->Apply(PixelTargets(spatial, step.slot), rng)
            : step.op->Apply(PixelTargets(state.rendered(instance, 0).image),
                             rng);
    if (!s.ok()) return s;
  }
  if (times != nullptr) times->augment_ns += NowNs() - pixel_ns;
  return absl::OkStatus();
}

}  // namespace

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
  const int instances = static_cast<int>(instance_views_.size());
  const std::vector<DecodeSpec>& decodes = steps_->decodes;
  DecoderSet decoders(max_decode_pixels_);
  SampleState state(num_images, instances);
  for (int slot = 0; slot < num_images; ++slot) {
    ImageField& field = state.field(slot);
    field.encoded = fields[image_fields_[slot]];
    absl::StatusOr<ImageDecoder*> decoder = decoders.Open(field.encoded);
    if (!decoder.ok()) return decoder.status();
    field.decoder = *decoder;
    if (slot > 0) {
      if (absl::Status s = CheckSameSize(state, decodes, slot); !s.ok()) {
        return s;
      }
    }
  }
  // Instance 0 draws from `rng`, instance g from its own generator, made
  // here (only pipelines with views have more than one instance; an empty
  // deque would allocate too).
  std::optional<std::deque<SampleRng>> instance_rngs;
  if (instances > 1) instance_rngs.emplace();
  const auto rng_of = [&](int instance) -> SampleRng& {
    return instance == 0 ? rng : (*instance_rngs)[instance - 1];
  };
  if (num_images > 0) {
    const ImageDecoder& first = *state.field(0).decoder;
    for (int g = 0; g < instances; ++g) {
      if (g > 0) instance_rngs->emplace_back(rng, static_cast<uint32_t>(g));
      View& view = state.view(g);
      view = FullView(first.width(), first.height());
      for (const std::unique_ptr<GeometryOp>& op :
           steps_->views[instance_views_[g]].geometry) {
        if (absl::Status s = op->Apply(view, rng_of(g)); !s.ok()) return s;
      }
    }
  }
  // Sniffing and header parsing count as decode.
  if (times != nullptr) times->decode_ns += NowNs() - start_ns;

  // Each field is decoded once for all instances; instance g's rendered
  // field writes output g * num_images + slot.
  const auto output_of = [num_images](int g, int slot) {
    return static_cast<size_t>(g) * num_images + slot;
  };
  absl::InlinedVector<RenderBuffers, 1> buffers(
      static_cast<size_t>(num_images) * instances);
  for (int slot = 0; slot < num_images; ++slot) {
    absl::InlinedVector<uint8_t*, 1> into(instances);
    absl::InlinedVector<ImageBuffer, 1> images(instances);
    for (int g = 0; g < instances; ++g) {
      // A uint8 HWC output is the rendered image itself: render into it.
      if (ConverterOf(instance_views_[g], slot).is_passthrough()) {
        into[g] = dst[output_of(g, slot)];
      }
    }
    if (absl::Status s =
            RenderViews(state.views(), state.field(slot).decoder, into,
                        absl::MakeSpan(buffers).subspan(
                            static_cast<size_t>(slot) * instances, instances),
                        absl::MakeSpan(images), times, decodes[slot].nearest);
        !s.ok()) {
      return s;
    }
    for (int g = 0; g < instances; ++g) {
      state.rendered(g, slot) = {images[g], state.view(g).flip};
    }
  }
  for (int g = 0; g < instances; ++g) {
    const int v = instance_views_[g];
    const PipelineSteps::View& view = steps_->views[v];
    if (absl::Status s = RunPixelOps(view, decodes, state, g, rng_of(g), times);
        !s.ok()) {
      return s;
    }
    for (int slot = 0; slot < num_images; ++slot) {
      const RenderedField& field = state.rendered(g, slot);
      WriteRendered(field.image, field.flip_pending, ConverterOf(v, slot),
                    dst[output_of(g, slot)], times);
    }
    if (!view.tensor.empty()) {
      const int64_t tensor_ns = times != nullptr ? NowNs() : 0;
      const View& geometry = state.view(g);
      for (const PipelineSteps::Bound<TensorOp>& step : view.tensor) {
        TensorRef out;
        out.data = dst[output_of(g, step.slot)];
        out.dtype = view.format.dtype;
        out.layout = view.format.layout;
        out.height = geometry.out_height;
        out.width = geometry.out_width;
        if (absl::Status s = step.op->Apply(out, rng_of(g)); !s.ok()) return s;
      }
      if (times != nullptr) times->augment_ns += NowNs() - tensor_ns;
    }
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
  if (!has_batch_op()) return absl::OkStatus();
  if (tensors.size() != outputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch run got ", tensors.size(), " tensors; the "
                     "pipeline has ", outputs_.size(), " outputs"));
  }
  const BatchOp& op = *steps_->batch;
  const OutputFormat& format = steps_->views[0].format;
  BatchImages batch;
  batch.image = {tensors[batch_->image_slot], format.dtype, format.layout,
                 batch_->height, batch_->width, 3};
  batch.size = size;
  batch.soft = reinterpret_cast<float*>(tensors[batch_->soft_slot]);
  batch.num_classes = op.soft_labels().num_classes;
  return op.Apply(batch, rng);
}

}  // namespace stoker::pipeline
