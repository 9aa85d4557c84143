// adjust_sharpness {sharpness_factor, p: 0.5}: torchvision's
// RandomAdjustSharpness: with probability p, blends the image with its 3x3
// smoothing by sharpness_factor (0 smooths, 1 keeps, 2 sharpens).

#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

OpDef MakeAdjustSharpnessDef() {
  OpDef def;
  def.name = "adjust_sharpness";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Sharpens (factor > 1) or smooths (< 1) the image with probability p, "
      "as torchvision's RandomAdjustSharpness; the border pixels keep their "
      "values before the blend.";
  def.args = {
      ArgSpec::Required("sharpness_factor", ArgType::kFloat,
                        "0 smooths, 1 keeps the image, 2 doubles the "
                        "sharpness.")
          .AtLeast(0),
      ProbabilityArg(0.5),
  };
  def.example = "adjust_sharpness: {sharpness_factor: 2}";
  def.factory = [](const OpArgs& args) {
    const double factor = *FindArg<double>(args, "sharpness_factor");
    return MakeKernelOp(args, [factor](const ImageBuffer& image, SampleRng&) {
      kernels::AdjustSharpness(image, factor);
    });
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeAdjustSharpnessDef);

}  // namespace stoker::pipeline
