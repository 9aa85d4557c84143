// random_grayscale {p: 0.1}: torchvision's RandomGrayscale: with
// probability p, each pixel becomes its luma (0.2989 R + 0.587 G + 0.114 B,
// truncated) in all three channels.

#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

OpDef MakeRandomGrayscaleDef() {
  OpDef def;
  def.name = "random_grayscale";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Converts the image to grayscale with probability p, kept as 3 equal "
      "channels, as torchvision's RandomGrayscale.";
  def.args = {ProbabilityArg(0.1)};
  def.example = "random_grayscale: {p: 0.2}";
  def.factory = [](const OpArgs& args) {
    return MakeKernelOp(args, [](const ImageBuffer& image, SampleRng&) {
      kernels::Grayscale(image);
    });
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRandomGrayscaleDef);

}  // namespace stoker::pipeline
