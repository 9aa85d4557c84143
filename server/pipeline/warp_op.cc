#include "server/pipeline/warp_op.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"

namespace stoker::pipeline {
namespace {

double Draw(const WarpRange& range, SampleRng& rng) {
  return range[0] == range[1] ? range[0] : rng.Uniform(range[0], range[1]);
}

}  // namespace

absl::Status WarpOp::Apply(const PixelTargets& targets, SampleRng& rng) const {
  if (!rng.Bernoulli(common_.p)) return absl::OkStatus();
  const ImageBuffer& image = targets.main();
  // RandomAffine.get_params, in its order: angle, tx, ty, scale, shears.
  const double angle = Draw(ranges_.degrees, rng);
  double tx = 0, ty = 0;
  if (ranges_.translate) {
    // int(round(uniform(-max_dx, max_dx))), Python's round: half to even.
    const double max_dx = (*ranges_.translate)[0] * image.width;
    const double max_dy = (*ranges_.translate)[1] * image.height;
    if (max_dx > 0) tx = std::nearbyint(rng.Uniform(-max_dx, max_dx));
    if (max_dy > 0) ty = std::nearbyint(rng.Uniform(-max_dy, max_dy));
  }
  const double scale = ranges_.scale ? Draw(*ranges_.scale, rng) : 1.0;
  const double shear_x = Draw(ranges_.shear_x, rng);
  const double shear_y = Draw(ranges_.shear_y, rng);
  // One draw, the same warp on every spatial field (a mask with nearest).
  targets.ForEachSpatial(
      common_.interpolation, common_.fill,
      [&](const ImageBuffer& target, kernels::WarpInterpolation interpolation,
          const kernels::WarpFill& fill) {
        kernels::Affine(target, ranges_.counter_clockwise ? -angle : angle, tx,
                        ty, scale, shear_x, shear_y, interpolation, fill,
                        common_.center);
      });
  return absl::OkStatus();
}

std::vector<ArgSpec> WarpCommonArgs() {
  return {
      ArgSpec::Optional("interpolation", ArgType::kString,
                        ArgValue(std::string("nearest")),
                        "How the warped image is sampled (torchvision's "
                        "tensor path has these two).")
          .OneOf({"nearest", "bilinear"}),
      ArgSpec::Optional("fill", ArgType::kFloatList,
                        ArgValue(std::vector<double>{0.0}),
                        "Colour of the pixels mapped from outside the image: "
                        "one value, or one per channel (0-255).")
          .Between(0, 255),
      ArgSpec::Optional("center", ArgType::kFloatList, std::nullopt,
                        "[x, y] in pixels from the top-left corner to turn "
                        "about; the image centre when not given."),
      ArgSpec::Optional("p", ArgType::kFloat, ArgValue(1.0),
                        "Probability that the op applies.")
          .Between(0, 1),
  };
}

std::vector<ArgSpec> PolicyWarpArgs() {
  std::vector<ArgSpec> args = WarpCommonArgs();
  args.resize(2);  // interpolation, fill.
  args[1] = ArgSpec::Optional("fill", ArgType::kFloatList, std::nullopt,
                              "Colour of the pixels the geometric ops map "
                              "from outside the image: one value, or one per "
                              "channel (0-255); not given: 0, as "
                              "torchvision's fill=None.")
                .Between(0, 255);
  return args;
}

absl::StatusOr<kernels::WarpFill> ReadFillArg(absl::string_view op,
                                              const OpArgs& args) {
  const auto* fill = FindArg<std::vector<double>>(args, "fill");
  if (fill == nullptr) return kernels::WarpFill();
  if (fill->size() != 1 && fill->size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", op, "': argument 'fill' must have 1 or 3 values, ",
                     "not ", fill->size()));
  }
  std::array<float, 3> colour;
  for (int c = 0; c < 3; ++c) {
    colour[c] = static_cast<float>((*fill)[fill->size() == 1 ? 0 : c]);
  }
  return kernels::WarpFill(colour);
}

absl::StatusOr<PolicyWarp> ReadPolicyWarp(absl::string_view op,
                                          const OpArgs& args) {
  PolicyWarp warp;
  warp.interpolation =
      ParseWarpInterpolation(*FindArg<std::string>(args, "interpolation"));
  absl::StatusOr<kernels::WarpFill> fill = ReadFillArg(op, args);
  if (!fill.ok()) return fill.status();
  warp.fill = *fill;
  return warp;
}

kernels::WarpInterpolation ParseWarpInterpolation(const std::string& name) {
  return name == "bilinear" ? kernels::WarpInterpolation::kBilinear
                            : kernels::WarpInterpolation::kNearest;
}

absl::StatusOr<WarpCommon> ReadWarpCommon(absl::string_view op,
                                          const OpArgs& args) {
  WarpCommon common;
  common.p = *FindArg<double>(args, "p");
  common.interpolation =
      ParseWarpInterpolation(*FindArg<std::string>(args, "interpolation"));
  // `fill` has a default here, so it is always given.
  absl::StatusOr<kernels::WarpFill> fill = ReadFillArg(op, args);
  if (!fill.ok()) return fill.status();
  common.fill = *fill;
  if (const auto* center = FindArg<std::vector<double>>(args, "center")) {
    if (center->size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "': argument 'center' must be [x, y], not ",
                       center->size(), " values"));
    }
    common.center = {true, (*center)[0], (*center)[1]};
  }
  return common;
}

absl::StatusOr<WarpRange> ReadSymmetricRange(
    absl::string_view op, absl::string_view arg,
    const std::vector<double>& values) {
  if (values.size() == 1) {
    if (!(values[0] >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "': argument '", arg,
                       "' as one number must be >= 0, not ", values[0]));
    }
    return WarpRange{-values[0], values[0]};
  }
  if (values.size() != 2 || !(values[0] <= values[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", op, "': argument '", arg,
                     "' must be a number or [lo, hi] with lo <= hi"));
  }
  return WarpRange{values[0], values[1]};
}

AnyOp MakeWarpOp(const WarpRanges& ranges, const WarpCommon& common) {
  return AnyOp(
      std::unique_ptr<PixelOp>(std::make_unique<WarpOp>(ranges, common)));
}

}  // namespace stoker::pipeline
