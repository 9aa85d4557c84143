// translate {x: 0, y: 0, interpolation: nearest, fill: [0], p: 1}:
// RandomAffine(degrees=0, translate=[x, y]): per image a horizontal shift
// round(uniform(-x w, x w)) pixels and a vertical one
// round(uniform(-y h, y h)), as RandomAffine.get_params draws them.

#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeTranslate(const OpArgs& args) {
  absl::StatusOr<WarpCommon> common = ReadWarpCommon("translate", args);
  if (!common.ok()) return common.status();
  WarpRanges ranges;
  ranges.translate =
      WarpRange{*FindArg<double>(args, "x"), *FindArg<double>(args, "y")};
  return MakeWarpOp(ranges, *common);
}

OpDef MakeTranslateDef() {
  OpDef def;
  def.name = "translate";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Shifts the image by whole pixels drawn per image, as torchvision's "
      "RandomAffine with only `translate` (tensor path).";
  def.args = {
      ArgSpec::Optional("x", ArgType::kFloat, ArgValue(0.0),
                        "Largest horizontal shift, as a fraction of the width.")
          .Between(0, 1),
      ArgSpec::Optional("y", ArgType::kFloat, ArgValue(0.0),
                        "Largest vertical shift, as a fraction of the height.")
          .Between(0, 1),
  };
  for (ArgSpec& arg : WarpCommonArgs()) {
    if (arg.name != "center") def.args.push_back(std::move(arg));
  }
  def.example = "translate: {x: 0.1, y: 0.1}";
  def.factory = MakeTranslate;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeTranslateDef);

}  // namespace stoker::pipeline
