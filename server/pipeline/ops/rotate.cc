// rotate {degrees, interpolation: nearest, fill: [0], center, p: 1}:
// torchvision's RandomRotation (expand=False): the angle is drawn uniformly
// from degrees (a number d: [-d, d]) and the image turned counter-clockwise
// by it about the centre (F.rotate, tensor path; kernels/warp.h).

#include "absl/strings/str_cat.h"
#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeRotate(const OpArgs& args) {
  absl::StatusOr<WarpCommon> common = ReadWarpCommon("rotate", args);
  if (!common.ok()) return common.status();
  WarpRanges ranges;
  ranges.counter_clockwise = true;
  absl::StatusOr<WarpRange> degrees = ReadSymmetricRange(
      "rotate", "degrees", *FindArg<std::vector<double>>(args, "degrees"));
  if (!degrees.ok()) return degrees.status();
  ranges.degrees = *degrees;
  return MakeWarpOp(ranges, *common);
}

OpDef MakeRotateDef() {
  OpDef def;
  def.name = "rotate";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Turns the image counter-clockwise by an angle drawn uniformly per "
      "image, as torchvision's RandomRotation (tensor path, expand=False).";
  def.args = {
      ArgSpec::Required("degrees", ArgType::kFloatOrPair,
                        "Angle range in degrees: d for [-d, d], or [lo, hi]."),
  };
  for (ArgSpec& arg : WarpCommonArgs()) def.args.push_back(std::move(arg));
  def.example = "rotate: {degrees: 30, interpolation: bilinear}";
  def.factory = MakeRotate;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRotateDef);

}  // namespace stoker::pipeline
