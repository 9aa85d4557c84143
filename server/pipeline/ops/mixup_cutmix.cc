// mixup_cutmix {mixup_alpha: 1.0, cutmix_alpha: 0.0, switch_prob: 0.5,
// num_classes, label, label_smoothing: 0, prob: 1.0}: timm's Mixup in its
// "batch" mode, with torchvision's partner (i - 1) and CutMix box: per
// batch, with probability prob, CutMix with probability switch_prob when
// both alphas are above 0, else the one that is (mix_op.h). An alpha of 0
// turns its half off; MixUp needs a float output.

#include "server/pipeline/mix_op.h"

namespace stoker::pipeline {
namespace {

OpDef MakeMixupCutmixDef() {
  return MixOpDef(
      "mixup_cutmix",
      "Per batch, with probability prob: CutMix (with probability "
      "switch_prob) or MixUp, as timm's Mixup with torchvision's partner "
      "and box; an alpha of 0 turns its half off. Adds the soft labels "
      "<label>_soft, smoothed as timm's.",
      "mixup_cutmix: {mixup_alpha: 0.8, cutmix_alpha: 1.0, num_classes: 1000}",
      {ArgSpec::Optional("mixup_alpha", ArgType::kFloat, ArgValue(1.0),
                         "MixUp's Beta parameter; 0: no MixUp.")
           .AtLeast(0),
       ArgSpec::Optional("cutmix_alpha", ArgType::kFloat, ArgValue(0.0),
                         "CutMix's Beta parameter; 0: no CutMix.")
           .AtLeast(0),
       ArgSpec::Optional("switch_prob", ArgType::kFloat, ArgValue(0.5),
                         "Probability of CutMix rather than MixUp when both "
                         "alphas are above 0.")
           .Between(0, 1)},
      [](const OpArgs& args) {
        MixParams params;
        params.mixup_alpha = *FindArg<double>(args, "mixup_alpha");
        params.cutmix_alpha = *FindArg<double>(args, "cutmix_alpha");
        params.switch_prob = *FindArg<double>(args, "switch_prob");
        return params;
      });
}

}  // namespace

STOKER_REGISTER_OP(MakeMixupCutmixDef);

}  // namespace stoker::pipeline
