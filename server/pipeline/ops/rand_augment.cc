// rand_augment {num_ops: 2, magnitude: 9, num_magnitude_bins: 31,
// magnitude_std: 0, op_prob: 1, interpolation: nearest, fill}:
// torchvision's RandAugment, with timm's magnitude noise. Per image,
// num_ops times: one op of RandAugment's space (augment_space.h)
// uniformly; with op_prob < 1 it applies with that probability (timm's
// AugmentOp prob); with magnitude_std > 0 its level is drawn from
// N(magnitude, magnitude_std) (> 100: uniform in [0, magnitude]) and
// clamped to [0, num_magnitude_bins - 1], as timm's `mstd`; a sign if the
// op is signed; then _apply_op. torchvision's table already grows in
// severity with the level (signed factors around 1, Posterize's bits and
// Solarize's threshold falling), as timm's `inc1` ops do; timm's own op
// list (Invert, SolarizeAdd, relative translations, PIL fill 128) is not
// what this op implements (docs/augmentations.md).

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/pipeline/augment_space.h"
#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

struct RandAugmentParams {
  int num_ops, magnitude, num_bins;
  double magnitude_std, op_prob;
};

class RandAugmentOp final : public PixelOp {
 public:
  RandAugmentOp(const RandAugmentParams& params, const PolicyWarp& warp)
      : params_(params), warp_(warp) {}

  bool flip_invariant() const override { return false; }

  absl::Status Apply(const PixelTargets& targets,
                     SampleRng& rng) const override {
    const ImageBuffer& image = targets.main();
    for (int i = 0; i < params_.num_ops; ++i) {
      if (!rng.Bernoulli(params_.op_prob)) continue;
      const AugmentChoice choice = DrawRandAugment(
          params_.magnitude, params_.num_bins, params_.magnitude_std, rng);
      double magnitude = 0;
      if (choice.bin >= 0) {
        magnitude =
            Magnitude(AugmentSpace::kRandAugment, choice.op, choice.level,
                      params_.num_bins, image.height, image.width);
      }
      if (choice.negative) magnitude = -magnitude;
      ApplyAugmentOp(targets, choice.op, magnitude, warp_.interpolation,
                     warp_.fill);
    }
    return absl::OkStatus();
  }

 private:
  const RandAugmentParams params_;
  const PolicyWarp warp_;
};

absl::StatusOr<AnyOp> MakeRandAugment(const OpArgs& args) {
  absl::StatusOr<PolicyWarp> warp = ReadPolicyWarp("rand_augment", args);
  if (!warp.ok()) return warp.status();
  RandAugmentParams params;
  params.num_ops = static_cast<int>(*FindArg<int64_t>(args, "num_ops"));
  params.magnitude = static_cast<int>(*FindArg<int64_t>(args, "magnitude"));
  params.num_bins =
      static_cast<int>(*FindArg<int64_t>(args, "num_magnitude_bins"));
  params.magnitude_std = *FindArg<double>(args, "magnitude_std");
  params.op_prob = *FindArg<double>(args, "op_prob");
  if (params.magnitude >= params.num_bins) {
    return absl::InvalidArgumentError(
        absl::StrCat("op 'rand_augment': argument 'magnitude' must be below "
                     "num_magnitude_bins (",
                     params.num_bins, "), not ", params.magnitude));
  }
  return AnyOp(
      std::unique_ptr<PixelOp>(std::make_unique<RandAugmentOp>(params, *warp)));
}

OpDef MakeRandAugmentDef() {
  OpDef def;
  def.name = "rand_augment";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Applies num_ops ops of RandAugment's space, each chosen per image, at "
      "one magnitude bin with a random sign, as torchvision's RandAugment "
      "(tensor path); magnitude_std and op_prob add timm's magnitude noise "
      "and per-op probability (timm's rand-m9-mstd0.5: magnitude 9, "
      "num_magnitude_bins 11, magnitude_std 0.5, op_prob 0.5).";
  def.args = {
      ArgSpec::Optional("num_ops", ArgType::kInt, ArgValue(int64_t{2}),
                        "Ops applied one after another per image.")
          .Between(0, 16),
      ArgSpec::Optional("magnitude", ArgType::kInt, ArgValue(int64_t{9}),
                        "Magnitude bin, below num_magnitude_bins.")
          .AtLeast(0),
      ArgSpec::Optional("num_magnitude_bins", ArgType::kInt,
                        ArgValue(int64_t{31}),
                        "Number of magnitude bins per op.")
          .Between(2, 1024),
      ArgSpec::Optional("magnitude_std", ArgType::kFloat, ArgValue(0.0),
                        "timm's mstd: the level is drawn from N(magnitude, "
                        "std) per op, clamped to the bins; > 100 draws it "
                        "uniformly in [0, magnitude]; 0 keeps it fixed.")
          .AtLeast(0),
      ArgSpec::Optional("op_prob", ArgType::kFloat, ArgValue(1.0),
                        "Probability that each chosen op applies (timm: "
                        "0.5).")
          .Between(0, 1),
  };
  for (ArgSpec& arg : PolicyWarpArgs()) def.args.push_back(std::move(arg));
  def.example = "rand_augment: {num_ops: 2, magnitude: 9}";
  def.factory = MakeRandAugment;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRandAugmentDef);

}  // namespace stoker::pipeline
