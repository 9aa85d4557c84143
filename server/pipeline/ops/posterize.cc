// posterize {bits, p: 0.5}: torchvision's RandomPosterize: with
// probability p, keeps the top `bits` bits of every channel value.

#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

OpDef MakePosterizeDef() {
  OpDef def;
  def.name = "posterize";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Keeps the top `bits` bits of each channel value with probability p, "
      "as torchvision's RandomPosterize.";
  def.args = {
      ArgSpec::Required("bits", ArgType::kInt,
                        "Bits to keep per channel (0 gives black).")
          .Between(0, 8),
      ProbabilityArg(0.5),
  };
  def.example = "posterize: {bits: 4}";
  def.factory = [](const OpArgs& args) {
    const int bits = static_cast<int>(*FindArg<int64_t>(args, "bits"));
    return MakeKernelOp(args, [bits](const ImageBuffer& image, SampleRng&) {
      kernels::Posterize(image, bits);
    });
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakePosterizeDef);

}  // namespace stoker::pipeline
