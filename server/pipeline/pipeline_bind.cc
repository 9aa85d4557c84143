// Pipeline::Bind: a compiled pipeline bound to a dataset's fields, the
// outputs it writes and the fields that pass through; the per-sample run
// of the BoundPipeline it makes is pipeline.cc.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/pipeline/passthrough.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/pipeline_steps.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {

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

const OutputFormat& Pipeline::format() const { return steps_->views[0].format; }
int Pipeline::out_height() const { return steps_->views[0].out_height; }
int Pipeline::out_width() const { return steps_->views[0].out_width; }

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
        {soft_name, DType::kFloat32, {labels.num_classes}, {}, false}));
    return binding;
  }
  std::vector<absl::string_view> names;
  for (const InputField& field : schema) names.push_back(field.name);
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline '", name_, "': the batch op's label field '", labels.label,
      "' is not in the dataset; its fields: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<std::unique_ptr<BoundPipeline>> Pipeline::Bind(
    absl::Span<const InputField> schema, BindMode mode) const {
  const bool rendered = mode == BindMode::kRendered;
  if (rendered) {
    for (const std::string& name : op_names_) {
      // A view's op is "<view>.<op>".
      const OpDef* def =
          OpRegistry::Global().Find(name.substr(name.rfind('.') + 1));
      if (def == nullptr || def->kind != OpKind::kTensor) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "pipeline '", name_, "' has the tensor op ", name,
          ", which draws from the sample's generator after the pixel ops: "
          "its rendering cannot be finished elsewhere"));
    }
  }
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
  }
  // Instance-major: instance g's decode s writes output g * decodes + s.
  for (const PipelineSteps::View& view : steps_->views) {
    for (int k = 0; k < view.count; ++k) {
      std::string prefix;
      if (!view.name.empty()) {
        prefix = view.count == 1 ? absl::StrCat(view.name, ".")
                                 : absl::StrCat(view.name, ".", k, ".");
      }
      for (const DecodeSpec& decode : steps_->decodes) {
        const OutputFormat format =
            FieldFormat(rendered ? OutputFormat{} : view.format, decode);
        slots.push_back(tensor::OutputSlot::Dense(
            {prefix + decode.field, format.dtype,
             ImageShape(format, view.out_height, view.out_width), {}, false}));
      }
    }
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
    // Decode i writes output i (the loop above; a batch op has one view).
    batch->image_slot = static_cast<size_t>(steps_->batch_slot);
    batch->height = out_height();
    batch->width = out_width();
  }
  return absl::WrapUnique(new BoundPipeline(
      steps_, rendered, max_decode_pixels_, schema.size(),
      std::move(image_fields),
      std::move(passthrough), std::move(slots), batch));
}

}  // namespace stoker::pipeline
