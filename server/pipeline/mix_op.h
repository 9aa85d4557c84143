// MixOp: the batch op behind mixup, cutmix and mixup_cutmix (ops/). Once
// per batch, with probability `prob`, it draws lambda ~ Beta(alpha, alpha)
// from the batch's generator and mixes each sample with its partner i - 1
// (kernels/mix.h): MixUp blends the images, CutMix pastes the partner's
// box and sets lambda to 1 - box area / image area; the soft labels mix
// with that lambda. With both alphas above 0 it picks CutMix with
// probability `switch_prob`, as timm's Mixup does in its default "batch"
// mode (mixup: cutmix_alpha 0; cutmix: mixup_alpha 0).
//
// Draws, in order: the Bernoulli of prob (none at prob 1), the switch
// (only with both alphas above 0), the Beta's Gamma draws, and for CutMix
// the box's centre x, then y. The args the three ops share (num_classes,
// label, label_smoothing, prob) are declared and read here.
//
// Thread-safety: immutable; Apply may run on many threads at once.
#ifndef STOKER_SERVER_PIPELINE_MIX_OP_H_
#define STOKER_SERVER_PIPELINE_MIX_OP_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/pipeline/op.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {

struct MixParams {
  double mixup_alpha = 0.0;   // 0: no MixUp.
  double cutmix_alpha = 0.0;  // 0: no CutMix.
  double switch_prob = 0.5;   // CutMix's share when both are on.
  double prob = 1.0;          // That the batch is mixed at all.
  SoftLabels labels;
};

class MixOp final : public BatchOp {
 public:
  explicit MixOp(MixParams params) : params_(std::move(params)) {}

  const SoftLabels& soft_labels() const override { return params_.labels; }
  // MixUp (mixup_alpha > 0) needs a float output: blended uint8 levels
  // would be rounded. CutMix copies elements, so any dtype does.
  absl::Status Check(const OutputFormat& format) const override;
  absl::Status Apply(const BatchImages& batch, SampleRng& rng) const override;

 private:
  const MixParams params_;
};

// The definition of a batch op over MixOp: `alphas` (its own args) first,
// then num_classes (required), label, label_smoothing (default 0:
// torchvision's recipe smooths in the loss), prob (default 1) and field.
// `params` reads the op's own args; the factory fills in the shared ones
// and refuses params with neither alpha above 0.
OpDef MixOpDef(std::string name, std::string doc, std::string example,
               std::vector<ArgSpec> alphas,
               std::function<MixParams(const OpArgs&)> params);

// An `alpha` argument, > 0, default 1: the Beta parameter of lambda.
ArgSpec AlphaArg();

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_MIX_OP_H_
