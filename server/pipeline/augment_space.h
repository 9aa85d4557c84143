// The augmentation spaces of torchvision 0.14's autoaugment.py, as data:
// which ops TrivialAugmentWide, RandAugment and AutoAugment choose from (in
// the order of torchvision's `_augmentation_space` dicts, which fixes what
// an op index means), each op's magnitude per bin, whether its magnitude
// is signed, which ops ignore it; `_apply_op`, which maps an (op,
// magnitude) to a kernel call; AutoAugment's ImageNet policy; and the draws
// each policy makes, so the ops in ops/ are thin and the tables and draws
// can be tested directly (tests/pipeline/augment_space_test.cc, and
// tests/python/test_augment_space.py against torchvision itself).
//
// Thread-safety: the tables are constant; the functions are pure but for
// the generator and image they are handed.
#ifndef STOKER_SERVER_PIPELINE_AUGMENT_SPACE_H_
#define STOKER_SERVER_PIPELINE_AUGMENT_SPACE_H_

#include <array>
#include <string_view>

#include "absl/types/span.h"
#include "server/pipeline/image_buffer.h"
#include "server/pipeline/kernels/warp.h"
#include "server/pipeline/op.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::pipeline {

enum class AugmentOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};

// torchvision's name: "Identity", "ShearX", ..., "Invert".
std::string_view AugmentOpName(AugmentOp op);

enum class AugmentSpace {
  kTrivialAugmentWide,  // TrivialAugmentWide._augmentation_space(num_bins)
  kRandAugment,         // RandAugment._augmentation_space(num_bins, size)
  kAutoAugment,         // AutoAugment._augmentation_space(num_bins, size)
};

struct AugmentOpInfo {
  AugmentOp op;
  bool has_magnitudes;  // False: a 0-d tensor in torchvision, magnitude 0.
  bool is_signed;       // True: the magnitude is negated with chance 1/2.
};

// The ops of `space` in torchvision's dict order: 14 each (TA and RA start
// with Identity; AA has Invert instead).
absl::Span<const AugmentOpInfo> SpaceOps(AugmentSpace space);

// The magnitude of `op` at bin `level` of `num_bins` in `space`, for an
// image of `height` x `width` (RA's and AA's translations are a fraction
// of the size). At a whole level this is torchvision's table entry
// (linspace, or Posterize's `8 - round(i / ((n - 1) / k))`); a fractional
// level (RandAugment's magnitude noise) reads the same formulas between
// the bins. REQUIRES: op has magnitudes in space; num_bins >= 2;
// 0 <= level <= num_bins - 1.
double Magnitude(AugmentSpace space, AugmentOp op, double level, int num_bins,
                 int height, int width);

// torchvision's _apply_op(img, op, magnitude, interpolation, fill) on the
// image in place. `magnitude` is signed already.
void ApplyAugmentOp(const ImageBuffer& image, AugmentOp op, double magnitude,
                    kernels::WarpInterpolation interpolation,
                    const kernels::WarpFill& fill);

// Whether `op` moves pixels (the shears, translations and rotation), so
// that every spatial field of a sample must undergo it, not only the image.
bool IsPositional(AugmentOp op);

// ApplyAugmentOp on a sample's fields: a positional op on every spatial
// field (PixelTargets::ForEachSpatial: a mask with nearest and its own
// fill), a colour op on targets.main() only.
void ApplyAugmentOp(const PixelTargets& targets, AugmentOp op, double magnitude,
                    kernels::WarpInterpolation interpolation,
                    const kernels::WarpFill& fill);

// What a policy drew for one op.
struct AugmentChoice {
  AugmentOp op = AugmentOp::kIdentity;
  int bin = -1;           // -1: the op has no magnitudes (or was skipped).
  double level = 0;       // The bin, or the noisy level (RandAugment).
  bool negative = false;  // Drawn only for signed ops.
};

// TrivialAugmentWide.forward's draws: the op (uniform over SpaceOps), then
// a bin (uniform in [0, num_bins)) only if the op has magnitudes, then a
// sign only if it is signed. REQUIRES: num_bins >= 2.
AugmentChoice DrawTrivialAugment(int num_bins, SampleRng& rng);

// One of RandAugment's num_ops draws: the op (uniform over SpaceOps);
// if magnitude_std > 0 and the op has magnitudes, the level: a normal draw
// N(magnitude, magnitude_std) (magnitude_std > 100: uniform in [0,
// magnitude]), clamped to [0, num_bins - 1], as timm's AugmentOp; then a
// sign only if the op is signed. REQUIRES: 0 <= magnitude < num_bins.
AugmentChoice DrawRandAugment(int magnitude, int num_bins, double magnitude_std,
                              SampleRng& rng);

// One step of an AutoAugment sub-policy: op, probability, bin (-1: None).
struct PolicyStep {
  AugmentOp op;
  double p;
  int bin;
};
using SubPolicy = std::array<PolicyStep, 2>;

// AutoAugment._get_policies(AutoAugmentPolicy.IMAGENET): 25 sub-policies.
absl::Span<const SubPolicy> ImageNetPolicy();

// The bins AutoAugment reads its magnitudes from (forward: num_bins 10).
inline constexpr int kAutoAugmentBins = 10;

// AutoAugment.forward's draws (get_params): a sub-policy of ImageNetPolicy
// uniformly, two uniform probabilities, two signs, all drawn always; step
// i applies when its probability is <= the step's p, its magnitude
// negated when the op is signed and sign i is 0.
struct AutoAugmentChoice {
  int policy = 0;
  std::array<bool, 2> applies = {false, false};
  std::array<bool, 2> negative = {false, false};
};
AutoAugmentChoice DrawAutoAugment(SampleRng& rng);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_AUGMENT_SPACE_H_
