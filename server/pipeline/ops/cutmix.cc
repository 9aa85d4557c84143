// cutmix {alpha: 1.0, num_classes, label, label_smoothing: 0, prob: 1.0}:
// torchvision's RandomCutmix (references/classification/transforms.py),
// once per batch: lambda ~ Beta(alpha, alpha), one box of half sides
// int(0.5 * sqrt(1 - lambda) * side) around a uniform centre, clamped,
// pasted into each image from its partner i - 1; the soft labels mix with
// 1 - box area / image area (mix_op.h). Any output dtype.

#include "server/pipeline/mix_op.h"

namespace stoker::pipeline {
namespace {

OpDef MakeCutmixDef() {
  return MixOpDef(
      "cutmix",
      "Per batch, with probability prob: pastes one box, drawn as "
      "torchvision's RandomCutmix from lambda ~ Beta(alpha, alpha), into "
      "each image from the one before it in the batch (the first from the "
      "last), and adds the soft labels <label>_soft mixed by the share of "
      "the image each keeps.",
      "cutmix: {alpha: 1.0, num_classes: 1000}", {AlphaArg()},
      [](const OpArgs& args) {
        MixParams params;
        params.cutmix_alpha = *FindArg<double>(args, "alpha");
        return params;
      });
}

}  // namespace

STOKER_REGISTER_OP(MakeCutmixDef);

}  // namespace stoker::pipeline
