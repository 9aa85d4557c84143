// mixup {alpha: 1.0, num_classes, label, label_smoothing: 0, prob: 1.0}:
// torchvision's RandomMixup (references/classification/transforms.py),
// once per batch: lambda ~ Beta(alpha, alpha), each image blended with its
// partner i - 1 (the batch rolled by one), the soft labels likewise
// (mix_op.h). Needs a float output.

#include "server/pipeline/mix_op.h"

namespace stoker::pipeline {
namespace {

OpDef MakeMixupDef() {
  return MixOpDef(
      "mixup",
      "Per batch, with probability prob: blends each image with the one "
      "before it in the batch (the first with the last) by lambda ~ "
      "Beta(alpha, alpha), as torchvision's RandomMixup, and adds the soft "
      "labels <label>_soft mixed alike. Float outputs only.",
      "mixup: {alpha: 0.2, num_classes: 1000}", {AlphaArg()},
      [](const OpArgs& args) {
        MixParams params;
        params.mixup_alpha = *FindArg<double>(args, "alpha");
        return params;
      });
}

}  // namespace

STOKER_REGISTER_OP(MakeMixupDef);

}  // namespace stoker::pipeline
