// affine {degrees, translate, scale, shear, interpolation: nearest,
// fill: [0], center, p: 1}: torchvision's RandomAffine. Per image, in
// get_params' order: an angle from degrees (d: [-d, d]; clockwise, as
// F.affine), shifts round(uniform(-a w, a w)) and round(uniform(-b h,
// b h)) for translate [a, b], a scale from [lo, hi], and shears in degrees:
// s or [lo, hi] along x, or [x lo, x hi, y lo, y hi]. Then F.affine
// (tensor path; kernels/warp.h).

#include "absl/strings/str_cat.h"
#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeAffine(const OpArgs& args) {
  absl::StatusOr<WarpCommon> common = ReadWarpCommon("affine", args);
  if (!common.ok()) return common.status();
  WarpRanges ranges;
  absl::StatusOr<WarpRange> degrees = ReadSymmetricRange(
      "affine", "degrees", *FindArg<std::vector<double>>(args, "degrees"));
  if (!degrees.ok()) return degrees.status();
  ranges.degrees = *degrees;
  if (const auto* t = FindArg<std::vector<double>>(args, "translate")) {
    if (t->size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("op 'affine': argument 'translate' must be [a, b], not ",
                       t->size(), " values"));
    }
    ranges.translate = WarpRange{(*t)[0], (*t)[1]};
  }
  if (const auto* s = FindArg<std::vector<double>>(args, "scale")) {
    if (s->size() != 2 || !((*s)[0] <= (*s)[1])) {
      return absl::InvalidArgumentError(
          "op 'affine': argument 'scale' must be [lo, hi] with lo <= hi");
    }
    ranges.scale = WarpRange{(*s)[0], (*s)[1]};
  }
  if (const auto* shear = FindArg<std::vector<double>>(args, "shear")) {
    const std::vector<double>& v = *shear;
    if (v.size() == 4) {
      if (!(v[0] <= v[1] && v[2] <= v[3])) {
        return absl::InvalidArgumentError(
            "op 'affine': argument 'shear' must be [x lo, x hi, y lo, y hi] "
            "with lo <= hi");
      }
      ranges.shear_x = {v[0], v[1]};
      ranges.shear_y = {v[2], v[3]};
    } else if (v.size() <= 2) {
      absl::StatusOr<WarpRange> x = ReadSymmetricRange("affine", "shear", v);
      if (!x.ok()) return x.status();
      ranges.shear_x = *x;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "op 'affine': argument 'shear' must have 1, 2 or 4 values, not ",
          v.size()));
    }
  }
  return MakeWarpOp(ranges, *common);
}

OpDef MakeAffineDef() {
  OpDef def;
  def.name = "affine";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Rotates, shifts, scales and shears the image by amounts drawn per "
      "image, keeping the centre, as torchvision's RandomAffine (tensor "
      "path).";
  def.args = {
      ArgSpec::Required("degrees", ArgType::kFloatOrPair,
                        "Clockwise angle range in degrees: d for [-d, d], or "
                        "[lo, hi]; 0 for none."),
      ArgSpec::Optional("translate", ArgType::kFloatList, std::nullopt,
                        "[a, b]: shifts up to a * width and b * height.")
          .Between(0, 1),
      ArgSpec::Optional("scale", ArgType::kFloatList, std::nullopt,
                        "[lo, hi]: the scale factor's range.")
          .Above(0),
      ArgSpec::Optional("shear", ArgType::kFloatList, std::nullopt,
                        "Shear in degrees: [s] for [-s, s] along x, [lo, hi] "
                        "along x, or [x lo, x hi, y lo, y hi]."),
  };
  for (ArgSpec& arg : WarpCommonArgs()) def.args.push_back(std::move(arg));
  def.example =
      "affine: {degrees: 10, translate: [0.1, 0.1], scale: [0.9, 1.1], "
      "shear: [-5, 5]}";
  def.factory = MakeAffine;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeAffineDef);

}  // namespace stoker::pipeline
