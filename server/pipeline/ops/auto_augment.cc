// auto_augment {policy: imagenet, interpolation: nearest, fill}:
// torchvision's AutoAugment. Per image, as AutoAugment.get_params
// (augment_space.h's DrawAutoAugment): a sub-policy uniformly of the 25,
// two uniform probabilities and two signs; step i applies when its
// probability is <= the step's p, at its bin of AutoAugment's space with
// 10 bins, negated when signed and sign i is 0; then _apply_op.

#include <memory>

#include "server/pipeline/augment_space.h"
#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

class AutoAugmentOp final : public PixelOp {
 public:
  explicit AutoAugmentOp(const PolicyWarp& warp) : warp_(warp) {}

  bool flip_invariant() const override { return false; }

  absl::Status Apply(const PixelTargets& targets,
                     SampleRng& rng) const override {
    const AutoAugmentChoice choice = DrawAutoAugment(rng);
    const SubPolicy& policy = ImageNetPolicy()[choice.policy];
    const ImageBuffer& image = targets.main();
    for (int i = 0; i < 2; ++i) {
      if (!choice.applies[i]) continue;
      const PolicyStep& step = policy[i];
      double magnitude = 0;
      if (step.bin >= 0) {
        magnitude = Magnitude(AugmentSpace::kAutoAugment, step.op, step.bin,
                              kAutoAugmentBins, image.height, image.width);
      }
      if (choice.negative[i]) magnitude = -magnitude;
      ApplyAugmentOp(targets, step.op, magnitude, warp_.interpolation,
                     warp_.fill);
    }
    return absl::OkStatus();
  }

 private:
  const PolicyWarp warp_;
};

absl::StatusOr<AnyOp> MakeAutoAugment(const OpArgs& args) {
  absl::StatusOr<PolicyWarp> warp = ReadPolicyWarp("auto_augment", args);
  if (!warp.ok()) return warp.status();
  return AnyOp(
      std::unique_ptr<PixelOp>(std::make_unique<AutoAugmentOp>(*warp)));
}

OpDef MakeAutoAugmentDef() {
  OpDef def;
  def.name = "auto_augment";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Applies one of AutoAugment's learned sub-policies (two ops, each with "
      "its probability and magnitude), chosen per image, as torchvision's "
      "AutoAugment (tensor path).";
  def.args = {
      ArgSpec::Optional("policy", ArgType::kString,
                        ArgValue(std::string("imagenet")),
                        "The learned policy (ImageNet's).")
          .OneOf({"imagenet"}),
  };
  for (ArgSpec& arg : PolicyWarpArgs()) def.args.push_back(std::move(arg));
  def.example = "auto_augment: {policy: imagenet}";
  def.factory = MakeAutoAugment;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeAutoAugmentDef);

}  // namespace stoker::pipeline
