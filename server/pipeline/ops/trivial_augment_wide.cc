// trivial_augment_wide {num_magnitude_bins: 31, interpolation: nearest,
// fill}: torchvision's TrivialAugmentWide. Per image: one op of the 14 of
// its augmentation space (augment_space.h), uniformly; a magnitude bin
// uniformly if the op has magnitudes; a sign if it is signed; then
// _apply_op. The draws are DrawTrivialAugment's, from the sample's
// generator.

#include <memory>

#include "server/pipeline/augment_space.h"
#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

class TrivialAugmentWideOp final : public PixelOp {
 public:
  TrivialAugmentWideOp(int num_bins, const PolicyWarp& warp)
      : num_bins_(num_bins), warp_(warp) {}

  // Several of its ops are positional (shears, translations, rotation).
  bool flip_invariant() const override { return false; }

  absl::Status Apply(const PixelTargets& targets,
                     SampleRng& rng) const override {
    const AugmentChoice choice = DrawTrivialAugment(num_bins_, rng);
    const ImageBuffer& image = targets.main();
    double magnitude = 0;
    if (choice.bin >= 0) {
      magnitude = Magnitude(AugmentSpace::kTrivialAugmentWide, choice.op,
                            choice.level, num_bins_, image.height, image.width);
    }
    if (choice.negative) magnitude = -magnitude;
    ApplyAugmentOp(targets, choice.op, magnitude, warp_.interpolation,
                   warp_.fill);
    return absl::OkStatus();
  }

 private:
  const int num_bins_;
  const PolicyWarp warp_;
};

absl::StatusOr<AnyOp> MakeTrivialAugmentWide(const OpArgs& args) {
  absl::StatusOr<PolicyWarp> warp =
      ReadPolicyWarp("trivial_augment_wide", args);
  if (!warp.ok()) return warp.status();
  const int bins =
      static_cast<int>(*FindArg<int64_t>(args, "num_magnitude_bins"));
  return AnyOp(std::unique_ptr<PixelOp>(
      std::make_unique<TrivialAugmentWideOp>(bins, *warp)));
}

OpDef MakeTrivialAugmentWideDef() {
  OpDef def;
  def.name = "trivial_augment_wide";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Applies one op of TrivialAugment's wide space, chosen per image with a "
      "random magnitude bin and sign, as torchvision's TrivialAugmentWide "
      "(tensor path).";
  def.args = {
      ArgSpec::Optional("num_magnitude_bins", ArgType::kInt,
                        ArgValue(int64_t{31}),
                        "Number of magnitude bins per op.")
          .Between(2, 1024),
  };
  for (ArgSpec& arg : PolicyWarpArgs()) def.args.push_back(std::move(arg));
  def.example = "trivial_augment_wide: {interpolation: bilinear}";
  def.factory = MakeTrivialAugmentWide;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeTrivialAugmentWideDef);

}  // namespace stoker::pipeline
