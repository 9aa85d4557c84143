// shear {x: 0, y: 0, interpolation: nearest, fill: [0], center, p: 1}:
// RandomAffine(degrees=0, shear=[x lo, x hi, y lo, y hi]): shear angles in
// degrees along x and y, each drawn uniformly per image from its range (a
// number s: [-s, s]), about the image centre (or `center`).

#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeShear(const OpArgs& args) {
  absl::StatusOr<WarpCommon> common = ReadWarpCommon("shear", args);
  if (!common.ok()) return common.status();
  WarpRanges ranges;
  absl::StatusOr<WarpRange> x = ReadSymmetricRange(
      "shear", "x", *FindArg<std::vector<double>>(args, "x"));
  if (!x.ok()) return x.status();
  absl::StatusOr<WarpRange> y = ReadSymmetricRange(
      "shear", "y", *FindArg<std::vector<double>>(args, "y"));
  if (!y.ok()) return y.status();
  ranges.shear_x = *x;
  ranges.shear_y = *y;
  return MakeWarpOp(ranges, *common);
}

OpDef MakeShearDef() {
  OpDef def;
  def.name = "shear";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Shears the image along x and y by angles drawn per image, as "
      "torchvision's RandomAffine with only `shear` (tensor path).";
  const auto angle = [](const char* name, const char* axis) {
    return ArgSpec::Optional(name, ArgType::kFloatOrPair, ArgValue(0.0),
                             std::string("Shear angle along ") + axis +
                                 " in degrees: s for [-s, s], or [lo, hi].");
  };
  def.args = {angle("x", "x"), angle("y", "y")};
  for (ArgSpec& arg : WarpCommonArgs()) def.args.push_back(std::move(arg));
  def.example = "shear: {x: 15, p: 0.5}";
  def.factory = MakeShear;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeShearDef);

}  // namespace stoker::pipeline
