// equalize {p: 0.5}: torchvision's RandomEqualize: with probability p,
// equalizes each channel's histogram (torchvision's _scale_channel).

#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

OpDef MakeEqualizeDef() {
  OpDef def;
  def.name = "equalize";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Equalizes each channel's histogram with probability p, as "
      "torchvision's RandomEqualize. Works on the whole rendered image, so "
      "it must follow the crops.";
  def.args = {ProbabilityArg(0.5)};
  def.example = "equalize: {p: 0.5}";
  def.factory = [](const OpArgs& args) {
    return MakeKernelOp(args, [](const ImageBuffer& image, SampleRng&) {
      kernels::Equalize(image);
    });
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeEqualizeDef);

}  // namespace stoker::pipeline
