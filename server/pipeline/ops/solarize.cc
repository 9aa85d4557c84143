// solarize {threshold, p: 0.5}: torchvision's RandomSolarize: with
// probability p, every channel value >= threshold becomes 255 - value.

#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

OpDef MakeSolarizeDef() {
  OpDef def;
  def.name = "solarize";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Inverts every channel value at or above `threshold` with probability "
      "p, as torchvision's RandomSolarize.";
  def.args = {
      ArgSpec::Required("threshold", ArgType::kFloat,
                        "Values >= threshold (0-255) are inverted.")
          .Between(0, 255),
      ProbabilityArg(0.5),
  };
  def.example = "solarize: {threshold: 128, p: 0.2}";
  def.factory = [](const OpArgs& args) {
    const double threshold = *FindArg<double>(args, "threshold");
    return MakeKernelOp(args,
                        [threshold](const ImageBuffer& image, SampleRng&) {
                          kernels::Solarize(image, threshold);
                        });
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeSolarizeDef);

}  // namespace stoker::pipeline
