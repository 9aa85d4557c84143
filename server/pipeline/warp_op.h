// WarpOp: the pixel op behind rotate, affine, shear and translate
// (ops/): with probability p it draws torchvision's RandomAffine parameters
// (RandomRotation's angle for rotate) from the sample's generator and warps
// the image of its field (kernels/warp.h). The args every warp shares
// (interpolation, fill, center, p) are declared and read here, so the four
// ops spell them alike.
//
// A warp is not flip-invariant: the pipeline mirrors a flipped image before
// it, so it sees what torchvision's transform sees after RandomHorizontalFlip.
// The draw is made once, from the bound field's size, and the same warp is
// applied to every spatial field of the sample (PixelTargets::
// ForEachSpatial): a mask decoded with nearest is warped with nearest and
// its own fill, so it stays aligned with its image.
//
// Thread-safety: immutable; Apply may run on many threads at once.
#ifndef STOKER_SERVER_PIPELINE_WARP_OP_H_
#define STOKER_SERVER_PIPELINE_WARP_OP_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/pipeline/kernels/warp.h"
#include "server/pipeline/op.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {

using WarpRange = std::array<double, 2>;

// What a warp draws per image, as RandomAffine.get_params: each range is
// [lo, hi]; a range with lo == hi draws nothing.
struct WarpRanges {
  WarpRange degrees = {0, 0};
  // Maximum |shift| as a fraction of the width and height; nullopt: none.
  std::optional<WarpRange> translate;
  std::optional<WarpRange> scale;  // nullopt: 1.
  WarpRange shear_x = {0, 0}, shear_y = {0, 0};
  // rotate's angle is counter-clockwise (F.rotate), affine's clockwise.
  bool counter_clockwise = false;
};

// The args shared by the warps, as read by ReadWarpCommon.
struct WarpCommon {
  double p = 1.0;
  kernels::WarpInterpolation interpolation =
      kernels::WarpInterpolation::kNearest;
  kernels::WarpFill fill;
  kernels::WarpCenter center;
};

class WarpOp final : public PixelOp {
 public:
  WarpOp(const WarpRanges& ranges, const WarpCommon& common)
      : ranges_(ranges), common_(common) {}

  bool flip_invariant() const override { return false; }

  absl::Status Apply(const PixelTargets& targets,
                     SampleRng& rng) const override;

 private:
  const WarpRanges ranges_;
  const WarpCommon common_;
};

// The shared args, in the order --help-config lists them after the op's
// own: interpolation (nearest), fill ([0], as RandomAffine), center, p (1).
std::vector<ArgSpec> WarpCommonArgs();

// Reads the shared args; InvalidArgument naming `op` and the argument for a
// fill of other than 1 or 3 values or a center of other than 2.
absl::StatusOr<WarpCommon> ReadWarpCommon(absl::string_view op,
                                          const OpArgs& args);

// A range argument in torchvision's form (_setup_angle): a number v >= 0
// gives [-v, v], a pair [lo, hi] needs lo <= hi. InvalidArgument naming
// `op` and `arg` otherwise.
absl::StatusOr<WarpRange> ReadSymmetricRange(absl::string_view op,
                                             absl::string_view arg,
                                             const std::vector<double>& values);

// The argument `fill` (a float list of 1 or 3 values, 0-255) as a colour;
// nullopt when not given. InvalidArgument naming `op` for another count.
absl::StatusOr<kernels::WarpFill> ReadFillArg(absl::string_view op,
                                              const OpArgs& args);

// The interpolation name of an InterpolationArg-declared argument.
kernels::WarpInterpolation ParseWarpInterpolation(const std::string& name);

// The warp args of the AutoAugment policies: interpolation (nearest) and
// fill, which defaults to torchvision's None there (outside pixels are 0,
// no mask blend).
std::vector<ArgSpec> PolicyWarpArgs();

struct PolicyWarp {
  kernels::WarpInterpolation interpolation =
      kernels::WarpInterpolation::kNearest;
  kernels::WarpFill fill;
};

// Reads PolicyWarpArgs; InvalidArgument naming `op` for a fill of other
// than 1 or 3 values.
absl::StatusOr<PolicyWarp> ReadPolicyWarp(absl::string_view op,
                                          const OpArgs& args);

// A WarpOp as an op factory's result.
AnyOp MakeWarpOp(const WarpRanges& ranges, const WarpCommon& common);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_WARP_OP_H_
