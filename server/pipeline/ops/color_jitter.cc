// color_jitter {brightness, contrast, saturation, hue, p: 1}: torchvision's
// ColorJitter. Each argument is a number v (brightness, contrast,
// saturation: a factor drawn from [max(0, 1 - v), 1 + v]; hue: from
// [-v, v]) or a range [lo, hi]; 0, [1, 1] (hue [0, 0]) turn that
// adjustment off. Per image: the order of the four adjustments is a random
// permutation (torch.randperm(4)), then each enabled factor is drawn, in
// the order brightness, contrast, saturation, hue, and the enabled
// adjustments run in the drawn order (kernels/color.h). With p < 1 the op
// applies with probability p, as RandomApply([ColorJitter(...)], p).

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/pipeline/kernel_op.h"
#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

using Range = std::optional<std::array<double, 2>>;

// torchvision's fn_idx numbering.
enum Adjustment { kBrightness, kContrast, kSaturation, kHue };
constexpr const char* kArgs[4] = {"brightness", "contrast", "saturation",
                                  "hue"};

class ColorJitterOp final : public PixelOp {
 public:
  ColorJitterOp(double p, const std::array<Range, 4>& ranges)
      : p_(p), ranges_(ranges) {}

  absl::Status Apply(const PixelTargets& targets,
                     SampleRng& rng) const override {
    if (!rng.Bernoulli(p_)) return absl::OkStatus();
    // torch.randperm(4): a uniform permutation, here by Fisher-Yates.
    std::array<int, 4> order = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i) {
      std::swap(order[i], order[rng.UniformInt(0, i)]);
    }
    std::array<double, 4> factor{};
    for (int a = 0; a < 4; ++a) {
      if (ranges_[a])
        factor[a] = rng.Uniform((*ranges_[a])[0], (*ranges_[a])[1]);
    }
    const ImageBuffer& image = targets.main();
    for (int a : order) {
      if (!ranges_[a]) continue;
      switch (a) {
        case kBrightness:
          kernels::AdjustBrightness(image, factor[a]);
          break;
        case kContrast:
          kernels::AdjustContrast(image, factor[a]);
          break;
        case kSaturation:
          kernels::AdjustSaturation(image, factor[a]);
          break;
        default:
          kernels::AdjustHue(image, factor[a]);
          break;
      }
    }
    return absl::OkStatus();
  }

 private:
  const double p_;
  const std::array<Range, 4> ranges_;  // nullopt: the adjustment is off.
};

// ColorJitter._check_input: the range of argument `a`, nullopt when it
// changes nothing, or InvalidArgument naming the argument.
absl::StatusOr<Range> ReadRange(const OpArgs& args, Adjustment a) {
  const std::vector<double>& v = *FindArg<std::vector<double>>(args, kArgs[a]);
  const double center = a == kHue ? 0.0 : 1.0;
  std::array<double, 2> range;
  if (v.size() == 1) {
    if (a == kHue && !(v[0] >= 0 && v[0] <= 0.5)) {
      return absl::InvalidArgumentError(
          absl::StrCat("op 'color_jitter': argument 'hue' as one number must "
                       "be in [0, 0.5], not ",
                       v[0]));
    }
    range = {center - v[0], center + v[0]};
    if (a != kHue) range[0] = std::max(range[0], 0.0);
  } else {
    if (!(v[0] <= v[1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op 'color_jitter': argument '", kArgs[a],
          "' must be [lo, hi] with lo <= hi, not [", v[0], ", ", v[1], "]"));
    }
    range = {v[0], v[1]};
  }
  if (range[0] == center && range[1] == center) return Range();
  return Range(range);
}

absl::StatusOr<AnyOp> MakeColorJitter(const OpArgs& args) {
  std::array<Range, 4> ranges;
  for (int a = 0; a < 4; ++a) {
    absl::StatusOr<Range> range = ReadRange(args, static_cast<Adjustment>(a));
    if (!range.ok()) return range.status();
    ranges[a] = *range;
  }
  return AnyOp(std::unique_ptr<PixelOp>(
      std::make_unique<ColorJitterOp>(*FindArg<double>(args, "p"), ranges)));
}

OpDef MakeColorJitterDef() {
  OpDef def;
  def.name = "color_jitter";
  def.kind = OpKind::kPixel;
  def.binds_field = true;
  def.doc =
      "Randomly changes brightness, contrast, saturation and hue, in a "
      "random order, as torchvision's ColorJitter (uint8 tensor path). v "
      "draws a factor from [max(0, 1 - v), 1 + v] (hue: [-v, v]); [lo, hi] "
      "gives the range; 0 turns an adjustment off.";
  const auto factor = [](const char* name, const char* what) {
    return ArgSpec::Optional(name, ArgType::kFloatOrPair, ArgValue(0.0),
                             absl::StrCat("How much to jitter ", what, "."))
        .AtLeast(0);
  };
  def.args = {
      factor("brightness", "brightness"),
      factor("contrast", "contrast"),
      factor("saturation", "saturation"),
      ArgSpec::Optional("hue", ArgType::kFloatOrPair, ArgValue(0.0),
                        "How much to jitter hue, in turns: v in [0, 0.5], or "
                        "[lo, hi] within [-0.5, 0.5].")
          .Between(-0.5, 0.5),
      ProbabilityArg(1.0),
  };
  def.example =
      "color_jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.2, hue: "
      "0.1, p: 0.8}";
  def.factory = MakeColorJitter;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeColorJitterDef);

}  // namespace stoker::pipeline
