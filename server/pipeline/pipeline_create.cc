#include "server/pipeline/pipeline.h"

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/pipeline/pipeline_definition.h"
#include "server/pipeline/pipeline_steps.h"

namespace stoker::pipeline {
namespace {

// "pipeline 'train': op[2] 'resize' (line 14): " for error messages, with
// "view 'local': " before the op when `view` is not empty (`index` is then
// the op's place in its view).
std::string OpContext(absl::string_view pipeline, absl::string_view view,
                      size_t index, const OpConfig& op) {
  const std::string in_view =
      view.empty() ? std::string() : absl::StrCat("view '", view, "': ");
  return absl::StrCat(
      "pipeline '", pipeline, "': ", in_view, "op[", index, "] '", op.name, "'",
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

// Which list of a pipeline's config ops come from: the list form's one
// list, the decode list of a pipeline with views, or one of its views.
enum class Section { kList, kDecode, kView };

// Why an op of `kind` cannot stand in `section`, or empty if it can.
std::string SectionProblem(Section section, OpKind kind) {
  if (section == Section::kDecode && kind > OpKind::kFields) {
    return "a pipeline with views takes only decode and fields ops "
           "(decode_image, drop_fields, ragged_limit) in its decode list; "
           "put the others under a view";
  }
  if (section == Section::kView && kind <= OpKind::kFields) {
    return "decode and fields ops go in the pipeline's decode list, shared "
           "by every view, not under a view";
  }
  if (section == Section::kView && kind == OpKind::kBatch) {
    return "batch ops (mixup, cutmix, mixup_cutmix) need a pipeline "
           "without views (the list form)";
  }
  return "";
}

// Why an op of `kind` cannot follow one of `previous`, or empty if it can;
// `first`: it is the first op of the pipeline.
std::string OrderProblem(bool first, OpKind kind, OpKind previous,
                         bool decoded) {
  if (first && kind != OpKind::kDecode && kind != OpKind::kFields) {
    return "out of order: the first op must be decode_image (or, for a "
           "pipeline that decodes nothing, drop_fields or ragged_limit)";
  }
  if (!first && kind == OpKind::kDecode && previous != OpKind::kDecode) {
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

// The slot of the decode op that decodes `field`, or -1.
int SlotOf(const std::vector<DecodeSpec>& decodes, const std::string& field) {
  for (size_t i = 0; i < decodes.size(); ++i) {
    if (decodes[i].field == field) return static_cast<int>(i);
  }
  return -1;
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

Pipeline::Pipeline(std::string name, std::vector<std::string> op_names,
                   std::shared_ptr<const PipelineSteps> steps,
                   int64_t max_decode_pixels, std::string definition)
    : name_(std::move(name)),
      op_names_(std::move(op_names)),
      steps_(std::move(steps)),
      max_decode_pixels_(max_decode_pixels),
      definition_(std::move(definition)) {}

namespace {

// Adds one list of a pipeline's config, `configs` from `section`, to
// `steps`: a decode op or a fields op to the steps' own lists, any other
// op to `view` (null for Section::kDecode), whose format and size it sets.
// `first` is the flat index of configs[0] (Pipeline::Create).
absl::Status AddOps(const std::string& pipeline, Section section,
                    const std::vector<OpConfig>& configs, size_t first,
                    PipelineSteps& steps, PipelineSteps::View* view,
                    std::vector<std::string>& op_names) {
  const std::string view_name = section == Section::kView ? view->name : "";
  OpKind previous =
      section == Section::kView ? OpKind::kFields : OpKind::kDecode;
  // A view starts from the decoded image, whose size varies.
  SizeEffect size;
  if (section == Section::kView) size = {SizeEffect::kVaries};
  for (size_t i = 0; i < configs.size(); ++i) {
    const OpConfig& config = configs[i];
    const size_t index = first + i;
    const std::string context = OpContext(pipeline, view_name, i, config);
    const OpDef* def = OpRegistry::Global().Find(config.name);
    if (def == nullptr) {
      return OpError(
          index,
          absl::StrCat(context, "unknown op; known ops: ",
                       absl::StrJoin(OpRegistry::Global().Names(), ", ")));
    }
    absl::StatusOr<OpArgs> args = ResolveArgs(*def, config.args);
    if (!args.ok()) {
      return OpError(index, absl::StrCat(context, args.status().message()));
    }
    absl::StatusOr<AnyOp> op = def->factory(*args);
    if (!op.ok()) {
      return OpError(index, absl::StrCat(context, op.status().message()));
    }
    const OpKind kind = KindOf(*op);
    if (kind != def->kind) {
      // The registration and the op disagree: a bug, not a config mistake.
      return OpError(index,
                     absl::StrCat(context, "registered as a ",
                                  std::string(OpKindName(def->kind)),
                                  " op, but its factory built a ",
                                  std::string(OpKindName(kind)), " op"),
                     absl::StatusCode::kInternal);
    }
    std::string problem = SectionProblem(section, kind);
    if (problem.empty()) {
      problem = OrderProblem(section != Section::kView && i == 0, kind,
                             previous, !steps.decodes.empty());
    }
    if (!problem.empty()) return OpError(index, absl::StrCat(context, problem));
    previous = kind;
    // The spatial field a pixel or tensor op works on: one that a decode op
    // before it decodes (Register made these ops bind a field).
    int slot = 0;
    if (kind == OpKind::kPixel || kind == OpKind::kTensor ||
        kind == OpKind::kBatch) {
      const std::string& field = *FindArg<std::string>(*args, kFieldArg);
      slot = SlotOf(steps.decodes, field);
      if (slot < 0) {
        return OpError(index, absl::StrCat(context, "field '", field,
                                           "' is not decoded by any decode "
                                           "op"));
      }
      if (steps.decodes[slot].nearest) {
        return OpError(
            index,
            absl::StrCat(context, "field '", field,
                         "' is decoded with interpolation: nearest (class "
                         "ids), which pixel and tensor ops do not work on; "
                         "bind the op to an image field (a warp bound to "
                         "the image moves the mask with it)"));
      }
    }
    if (kind == OpKind::kBatch && steps.batch != nullptr) {
      return OpError(index, absl::StrCat(context,
                                         "a pipeline takes one batch op (both "
                                         "would write the soft labels); use "
                                         "mixup_cutmix for MixUp and CutMix"));
    }
    // SectionProblem leaves only decode and fields ops to a null view.
    absl::Status status = std::visit(
        [&](auto& alternative) -> absl::Status {
          using T = std::decay_t<decltype(alternative)>;
          if constexpr (std::is_same_v<T, DecodeSpec>) {
            if (SlotOf(steps.decodes, alternative.field) >= 0) {
              return absl::InvalidArgumentError(
                  absl::StrCat("field '", alternative.field,
                               "' is already decoded by an earlier decode op"));
            }
            size = {SizeEffect::kVaries};
            steps.decodes.push_back(std::move(alternative));
          } else if constexpr (std::is_same_v<T, FieldSelection>) {
            steps.selections.push_back({std::move(alternative), context});
          } else if constexpr (std::is_same_v<T, std::unique_ptr<GeometryOp>>) {
            const SizeEffect effect = alternative->size_effect();
            if (effect.kind != SizeEffect::kKeeps) size = effect;
            view->geometry.push_back(std::move(alternative));
          } else if constexpr (std::is_same_v<T, std::unique_ptr<PixelOp>>) {
            view->pixel.push_back({std::move(alternative), slot});
          } else if constexpr (std::is_same_v<T, std::unique_ptr<FormatOp>>) {
            alternative->Apply(view->format);
          } else if constexpr (std::is_same_v<T, std::unique_ptr<TensorOp>>) {
            // Format ops come before tensor ops, so the format is final here.
            if (absl::Status s = alternative->Check(view->format); !s.ok()) {
              return s;
            }
            view->tensor.push_back({std::move(alternative), slot});
          } else {
            if (absl::Status s = alternative->Check(view->format); !s.ok()) {
              return s;
            }
            steps.batch = std::move(alternative);
            steps.batch_slot = slot;
          }
          return absl::OkStatus();
        },
        *op);
    if (!status.ok()) {
      return OpError(index, absl::StrCat(context, status.message()));
    }
    op_names.push_back(view_name.empty()
                           ? config.name
                           : absl::StrCat(view_name, ".", config.name));
  }
  if (section == Section::kDecode) return absl::OkStatus();
  const std::string where =
      absl::StrCat("pipeline '", pipeline, "'",
                   view_name.empty() ? std::string()
                                     : absl::StrCat(", view '", view_name, "'"),
                   ": ");
  if (!steps.decodes.empty() && size.kind != SizeEffect::kFixes) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     "the output size is not fixed; end the geometry ops with "
                     "random_resized_crop, center_crop or resize [h, w]"));
  }
  if (absl::Status s = PixelConverter::Check(view->format); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, s.message()));
  }
  view->out_height = size.height;
  view->out_width = size.width;
  return absl::OkStatus();
}

// Empty if `view` is a name views may have, else why not.
std::string ViewNameProblem(const std::string& view) {
  bool ok = !view.empty();
  for (char c : view) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-') ok = false;
  }
  return ok ? "" : "a view's name takes letters, digits, '_' and '-'";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    std::string name, const std::vector<OpConfig>& ops,
    int64_t max_decode_pixels) {
  return Create(std::move(name), PipelineConfig{ops, {}}, max_decode_pixels);
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    std::string name, const PipelineConfig& config, int64_t max_decode_pixels) {
  auto steps = std::make_shared<PipelineSteps>();
  std::vector<std::string> op_names;
  if (config.views.empty()) {
    if (config.ops.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline '", name, "' has no ops; it must start with decode_image"));
    }
    steps->views.emplace_back();
    if (absl::Status s = AddOps(name, Section::kList, config.ops, 0, *steps,
                                &steps->views[0], op_names);
        !s.ok()) {
      return s;
    }
  } else {
    if (config.views.size() > kMaxViews) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline '", name, "' has ", config.views.size(),
                       " views; at most ", kMaxViews));
    }
    const std::vector<OpConfig> decode =
        config.ops.empty() ? std::vector<OpConfig>{{"decode_image", {}, 0}}
                           : config.ops;
    if (absl::Status s = AddOps(name, Section::kDecode, decode, 0, *steps,
                                nullptr, op_names);
        !s.ok()) {
      return s;
    }
    size_t first = config.ops.size();
    for (const ViewConfig& view : config.views) {
      const std::string where = absl::StrCat(
          "pipeline '", name, "': view '", view.name, "'",
          view.line > 0 ? absl::StrCat(" (line ", view.line, ")") : "", ": ");
      std::string problem = ViewNameProblem(view.name);
      for (const PipelineSteps::View& earlier : steps->views) {
        if (earlier.name == view.name) problem = "a view of that name is above";
      }
      if (view.count < 1 || view.count > kMaxViewCount) {
        problem = absl::StrCat("count ", view.count, " is outside 1..",
                               kMaxViewCount);
      }
      if (!problem.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, problem));
      }
      PipelineSteps::View& steps_view = steps->views.emplace_back();
      steps_view.name = view.name;
      steps_view.count = view.count;
      if (absl::Status s = AddOps(name, Section::kView, view.ops, first, *steps,
                                  &steps_view, op_names);
          !s.ok()) {
        return s;
      }
      first += view.ops.size();
    }
  }
  return absl::WrapUnique(new Pipeline(
      std::move(name), std::move(op_names), std::move(steps), max_decode_pixels,
      PipelineDefinition(config, max_decode_pixels)));
}

}  // namespace stoker::pipeline
