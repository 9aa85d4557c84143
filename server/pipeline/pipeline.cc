#include "server/pipeline/pipeline.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace stoker::pipeline {
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

// The stage an op of `kind` runs in, or nullopt for kinds this pipeline
// cannot run yet (docs/pipeline-design.md §7, step 5b).
std::optional<OpStage> StageOfKind(OpKind kind) {
  switch (kind) {
    case OpKind::kDecode:
      return OpStage::kDecode;
    case OpKind::kGeometry:
      return OpStage::kGeometry;
    case OpKind::kFormat:
      return OpStage::kFormat;
    default:
      return std::nullopt;
  }
}

// An InvalidArgument (or `code`) error caused by op `index`.
absl::Status OpError(
    size_t index, std::string message,
    absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status status(code, message);
  status.SetPayload(kOpIndexPayload, absl::Cord(absl::StrCat(index)));
  return status;
}

// Why `stage` cannot follow `previous` at `index`, or empty if it can.
absl::string_view OrderProblem(size_t index, OpStage stage, OpStage previous) {
  if (index == 0 && stage != OpStage::kDecode) {
    return "out of order: the first op must be decode_image";
  }
  if (index > 0 && stage == OpStage::kDecode) {
    return "out of order: decode_image must be the first op, and only once";
  }
  if (stage < previous) {
    return "out of order: geometry ops must come before normalize and layout";
  }
  return {};
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

BoundPipeline::BoundPipeline(std::shared_ptr<const OpList> ops,
                             size_t sample_ops, const OutputFormat& format,
                             int64_t max_decode_pixels, size_t num_fields,
                             size_t image_field,
                             std::vector<size_t> int64_fields,
                             std::vector<tensor::TensorSpec> outputs)
    : ops_(std::move(ops)),
      sample_ops_(sample_ops),
      converter_(format),
      max_decode_pixels_(max_decode_pixels),
      num_fields_(num_fields),
      image_field_(image_field),
      int64_fields_(std::move(int64_fields)),
      outputs_(std::move(outputs)) {}

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
  DecoderSet decoders(max_decode_pixels_);
  ImageState state;
  state.encoded = fields[image_field_];
  state.decoders = &decoders;
  for (size_t i = 0; i < sample_ops_; ++i) {
    if (absl::Status s = (*ops_)[i]->Apply(state, rng); !s.ok()) return s;
  }
  if (state.decoder == nullptr) {
    // Create puts a decode op first, and it sets the decoder or fails.
    return absl::InternalError("no decode op set a decoder");
  }
  // Sniffing and header parsing count as decode.
  if (times != nullptr) times->decode_ns += NowNs() - start_ns;
  if (absl::Status s =
          RenderImage(state.view, converter_, state.decoder, dst[0], times);
      !s.ok()) {
    return s;
  }

  const int64_t labels_ns = times != nullptr ? NowNs() : 0;
  for (size_t i = 0; i < int64_fields_.size(); ++i) {
    const std::string_view field = fields[int64_fields_[i]];
    if (field.size() != sizeof(int64_t)) {
      return absl::DataLossError(absl::StrCat("int64 field '",
                                              outputs_[i + 1].name, "' has ",
                                              field.size(), " bytes, not 8"));
    }
    // Little-endian in the record; native order in the output tensor.
    uint64_t value = 0;
    for (int b = 7; b >= 0; --b) {
      value = (value << 8) | static_cast<uint8_t>(field[b]);
    }
    std::memcpy(dst[i + 1], &value, sizeof(value));
  }
  if (times != nullptr) times->collate_ns += NowNs() - labels_ns;
  return absl::OkStatus();
}

Pipeline::Pipeline(std::string name, std::vector<std::string> op_names,
                   std::shared_ptr<const BoundPipeline::OpList> ops,
                   size_t sample_ops, const OutputFormat& format,
                   int out_height, int out_width, int64_t max_decode_pixels)
    : name_(std::move(name)),
      op_names_(std::move(op_names)),
      ops_(std::move(ops)),
      sample_ops_(sample_ops),
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
  auto ops = std::make_shared<BoundPipeline::OpList>();
  std::vector<std::string> op_names;
  OpStage previous = OpStage::kDecode;
  SizeEffect size;
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
    absl::StatusOr<std::unique_ptr<Op>> op = def->factory(*args);
    if (!op.ok()) {
      return OpError(i, absl::StrCat(context, op.status().message()));
    }
    const OpStage stage = (*op)->stage();
    if (StageOfKind(def->kind) != stage) {
      // The registration and the op disagree: a bug, not a config mistake.
      const std::string_view kind = OpKindName(def->kind);
      return OpError(i,
                     absl::StrCat(context, "registered as a ",
                                  absl::string_view(kind.data(), kind.size()),
                                  " op, but the op it builds runs elsewhere"),
                     absl::StatusCode::kInternal);
    }
    if (absl::string_view problem = OrderProblem(i, stage, previous);
        !problem.empty()) {
      return OpError(i, absl::StrCat(context, problem));
    }
    previous = stage;
    const SizeEffect effect = (*op)->size_effect();
    if (effect.kind != SizeEffect::kKeeps) size = effect;
    ops->push_back(*std::move(op));
    op_names.push_back(config.name);
  }
  if (size.kind != SizeEffect::kFixes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline '", name,
        "': the output size is not fixed; end the geometry ops with "
        "random_resized_crop, center_crop or resize [h, w]"));
  }

  // Format ops do not depend on the sample: resolve them once, here.
  size_t sample_ops = 0;
  while (sample_ops < ops->size() &&
         (*ops)[sample_ops]->stage() != OpStage::kFormat) {
    ++sample_ops;
  }
  ImageState prototype;
  SampleRng unused_rng(0, 0, 0);
  for (size_t i = sample_ops; i < ops->size(); ++i) {
    if (absl::Status s = (*ops)[i]->Apply(prototype, unused_rng); !s.ok()) {
      return OpError(i,
                     absl::StrCat(OpContext(name, i, configs[i]), s.message()));
    }
  }
  if (absl::Status s = PixelConverter::Check(prototype.format); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline '", name, "': ", s.message()));
  }
  return absl::WrapUnique(new Pipeline(
      std::move(name), std::move(op_names), std::move(ops), sample_ops,
      prototype.format, size.height, size.width, max_decode_pixels));
}

absl::StatusOr<std::unique_ptr<BoundPipeline>> Pipeline::Bind(
    absl::Span<const InputField> schema) const {
  size_t image_field = schema.size();
  std::vector<size_t> int64_fields;
  std::vector<tensor::TensorSpec> outputs(1);
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].is_int64) {
      int64_fields.push_back(i);
      outputs.push_back({schema[i].name, tensor::DType::kInt64, {}});
    } else if (schema[i].name == "image") {
      image_field = i;
    }
  }
  if (image_field == schema.size()) {
    std::vector<absl::string_view> names;
    for (const InputField& field : schema) names.push_back(field.name);
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline '", name_,
                     "' needs a bytes field named 'image'; the "
                     "dataset has: ",
                     absl::StrJoin(names, ", ")));
  }
  outputs[0] = {"image", format_.dtype,
                ImageShape(format_, out_height_, out_width_)};
  return absl::WrapUnique(new BoundPipeline(
      ops_, sample_ops_, format_, max_decode_pixels_, schema.size(),
      image_field, std::move(int64_fields), std::move(outputs)));
}

}  // namespace stoker::pipeline
