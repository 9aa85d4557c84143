#include "server/pipeline/mix_op.h"

#include <memory>
#include <string>
#include <utility>

#include "server/pipeline/kernels/mix.h"

namespace stoker::pipeline {

absl::Status MixOp::Check(const OutputFormat& format) const {
  if (params_.mixup_alpha > 0 && format.dtype == tensor::DType::kUint8) {
    return absl::InvalidArgumentError(
        "MixUp blends images, which a uint8 output would round; normalize "
        "to float32 or float16 first, or use cutmix (which copies pixels)");
  }
  return absl::OkStatus();
}

absl::Status MixOp::Apply(const BatchImages& batch, SampleRng& rng) const {
  if (!rng.Bernoulli(params_.prob)) return absl::OkStatus();
  bool cutmix = params_.mixup_alpha <= 0;
  if (params_.mixup_alpha > 0 && params_.cutmix_alpha > 0) {
    cutmix = rng.Bernoulli(params_.switch_prob);
  }
  const double alpha = cutmix ? params_.cutmix_alpha : params_.mixup_alpha;
  double lambda = rng.Beta(alpha, alpha);
  if (cutmix) {
    const kernels::CutBox box =
        kernels::DrawCutBox(batch.image.height, batch.image.width, lambda, rng);
    kernels::PasteBox(batch, box);
    lambda = box.lambda;
  } else {
    kernels::MixUpImages(batch, lambda);
  }
  kernels::MixSoftLabels(batch, lambda);
  return absl::OkStatus();
}

OpDef MixOpDef(std::string name, std::string doc, std::string example,
               std::vector<ArgSpec> alphas,
               std::function<MixParams(const OpArgs&)> params) {
  OpDef def;
  def.name = std::move(name);
  def.kind = OpKind::kBatch;
  def.binds_field = true;
  def.doc = std::move(doc);
  def.example = std::move(example);
  def.args = std::move(alphas);
  def.args.push_back(ArgSpec::Required("num_classes", ArgType::kInt,
                                       "Classes of the soft labels: the "
                                       "output <label>_soft is float32 "
                                       "[num_classes].")
                         .Between(1, 1000000));
  def.args.push_back(ArgSpec::Optional(
      "label", ArgType::kString, ArgValue(std::string("label")),
      "The integer scalar field holding each sample's class, in [0, "
      "num_classes)."));
  def.args.push_back(ArgSpec::Optional("label_smoothing", ArgType::kFloat,
                                       ArgValue(0.0),
                                       "timm's: off = smoothing / "
                                       "num_classes, on = 1 - smoothing + "
                                       "off.")
                         .Between(0, 1));
  def.args.push_back(ArgSpec::Optional("prob", ArgType::kFloat, ArgValue(1.0),
                                       "Probability that a batch is mixed "
                                       "at all.")
                         .Between(0, 1));
  def.factory = [params = std::move(params)](
                    const OpArgs& args) -> absl::StatusOr<AnyOp> {
    MixParams p = params(args);
    if (!(p.mixup_alpha > 0) && !(p.cutmix_alpha > 0)) {
      return absl::InvalidArgumentError(
          "mixup_alpha or cutmix_alpha must be above 0");
    }
    p.labels.num_classes =
        static_cast<int>(*FindArg<int64_t>(args, "num_classes"));
    p.labels.label = *FindArg<std::string>(args, "label");
    p.labels.smoothing = *FindArg<double>(args, "label_smoothing");
    p.prob = *FindArg<double>(args, "prob");
    return AnyOp(
        std::unique_ptr<BatchOp>(std::make_unique<MixOp>(std::move(p))));
  };
  return def;
}

ArgSpec AlphaArg() {
  return ArgSpec::Optional("alpha", ArgType::kFloat, ArgValue(1.0),
                           "Beta distribution parameter of lambda.")
      .Above(0);
}

}  // namespace stoker::pipeline
