// gaussian_blur {kernel_size, sigma: [0.1, 2.0], p: 1}: torchvision's
// GaussianBlur: sigma drawn uniformly from [lo, hi] per image (one number:
// fixed), the kernel of kernels/blur.h, reflected borders. With p < 1 it
// applies with probability p, as RandomApply([GaussianBlur(...)], p).

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/blur.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeGaussianBlur(const OpArgs& args) {
  absl::StatusOr<std::vector<int>> size =
      ParseSizeArg("gaussian_blur", "kernel_size", args);
  if (!size.ok()) return size.status();
  for (int side : *size) {
    if (side % 2 == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("op 'gaussian_blur': argument 'kernel_size' must be "
                       "odd, not ",
                       side));
    }
  }
  const std::vector<double>& sigma =
      *FindArg<std::vector<double>>(args, "sigma");
  const double lo = sigma.front(), hi = sigma.back();
  if (!(lo <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("op 'gaussian_blur': argument 'sigma' must be [lo, hi] "
                     "with lo <= hi, not [",
                     lo, ", ", hi, "]"));
  }
  const int size_y = size->front(), size_x = size->back();
  return MakeKernelOp(args, [=](const ImageBuffer& image, SampleRng& rng) {
    const double s = lo == hi ? lo : rng.Uniform(lo, hi);
    kernels::GaussianBlur(image, size_x, size_y, s, s);
  });
}

OpDef MakeGaussianBlurDef() {
  OpDef def;
  def.name = "gaussian_blur";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Blurs with a Gaussian kernel, sigma drawn uniformly per image, as "
      "torchvision's GaussianBlur (tensor path; reflected borders); with "
      "probability p (RandomApply).";
  def.args = {
      ArgSpec::Required("kernel_size", ArgType::kIntOrPair,
                        "Odd kernel side, or [height, width] (torchvision "
                        "writes the pair width first: swap it).")
          .Between(1, kMaxImageSide),
      ArgSpec::Optional("sigma", ArgType::kFloatOrPair,
                        ArgValue(std::vector<double>{0.1, 2.0}),
                        "Standard deviation, or [lo, hi] to draw it from.")
          .Above(0),
      ProbabilityArg(1.0),
  };
  def.example = "gaussian_blur: {kernel_size: 23, sigma: [0.1, 2.0], p: 0.5}";
  def.factory = MakeGaussianBlur;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeGaussianBlurDef);

}  // namespace stoker::pipeline
