// autocontrast {p: 0.5}: torchvision's RandomAutocontrast: with
// probability p, stretches each channel from its [min, max] to [0, 255].

#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

OpDef MakeAutocontrastDef() {
  OpDef def;
  def.name = "autocontrast";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Stretches each channel to the full 0-255 range with probability p, "
      "as torchvision's RandomAutocontrast; a constant channel is kept.";
  def.args = {ProbabilityArg(0.5)};
  def.example = "autocontrast: {p: 0.5}";
  def.factory = [](const OpArgs& args) {
    return MakeKernelOp(args, [](const ImageBuffer& image, SampleRng&) {
      kernels::AutoContrast(image);
    });
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeAutocontrastDef);

}  // namespace stoker::pipeline
