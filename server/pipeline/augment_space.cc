#include "server/pipeline/augment_space.h"

#include <algorithm>
#include <cmath>

#include "server/pipeline/kernels/color.h"

namespace stoker::pipeline {
namespace {

constexpr double kPi = 3.14159265358979323846;

using Op = AugmentOp;

// The dicts of torchvision 0.14 autoaugment.py, in their order.
constexpr AugmentOpInfo kTrivialAugmentOps[] = {
    {Op::kIdentity, false, false},     {Op::kShearX, true, true},
    {Op::kShearY, true, true},         {Op::kTranslateX, true, true},
    {Op::kTranslateY, true, true},     {Op::kRotate, true, true},
    {Op::kBrightness, true, true},     {Op::kColor, true, true},
    {Op::kContrast, true, true},       {Op::kSharpness, true, true},
    {Op::kPosterize, true, false},     {Op::kSolarize, true, false},
    {Op::kAutoContrast, false, false}, {Op::kEqualize, false, false},
};
// RandAugment's dict has the same keys in the same order.
constexpr const AugmentOpInfo* kRandAugmentOps = kTrivialAugmentOps;
constexpr AugmentOpInfo kAutoAugmentOps[] = {
    {Op::kShearX, true, true},     {Op::kShearY, true, true},
    {Op::kTranslateX, true, true}, {Op::kTranslateY, true, true},
    {Op::kRotate, true, true},     {Op::kBrightness, true, true},
    {Op::kColor, true, true},      {Op::kContrast, true, true},
    {Op::kSharpness, true, true},  {Op::kPosterize, true, false},
    {Op::kSolarize, true, false},  {Op::kAutoContrast, false, false},
    {Op::kEqualize, false, false}, {Op::kInvert, false, false},
};

constexpr SubPolicy kImageNet[] = {
    {{{Op::kPosterize, 0.4, 8}, {Op::kRotate, 0.6, 9}}},
    {{{Op::kSolarize, 0.6, 5}, {Op::kAutoContrast, 0.6, -1}}},
    {{{Op::kEqualize, 0.8, -1}, {Op::kEqualize, 0.6, -1}}},
    {{{Op::kPosterize, 0.6, 7}, {Op::kPosterize, 0.6, 6}}},
    {{{Op::kEqualize, 0.4, -1}, {Op::kSolarize, 0.2, 4}}},
    {{{Op::kEqualize, 0.4, -1}, {Op::kRotate, 0.8, 8}}},
    {{{Op::kSolarize, 0.6, 3}, {Op::kEqualize, 0.6, -1}}},
    {{{Op::kPosterize, 0.8, 5}, {Op::kEqualize, 1.0, -1}}},
    {{{Op::kRotate, 0.2, 3}, {Op::kSolarize, 0.6, 8}}},
    {{{Op::kEqualize, 0.6, -1}, {Op::kPosterize, 0.4, 6}}},
    {{{Op::kRotate, 0.8, 8}, {Op::kColor, 0.4, 0}}},
    {{{Op::kRotate, 0.4, 9}, {Op::kEqualize, 0.6, -1}}},
    {{{Op::kEqualize, 0.0, -1}, {Op::kEqualize, 0.8, -1}}},
    {{{Op::kInvert, 0.6, -1}, {Op::kEqualize, 1.0, -1}}},
    {{{Op::kColor, 0.6, 4}, {Op::kContrast, 1.0, 8}}},
    {{{Op::kRotate, 0.8, 8}, {Op::kColor, 1.0, 2}}},
    {{{Op::kColor, 0.8, 8}, {Op::kSolarize, 0.8, 7}}},
    {{{Op::kSharpness, 0.4, 7}, {Op::kInvert, 0.6, -1}}},
    {{{Op::kShearX, 0.6, 5}, {Op::kEqualize, 1.0, -1}}},
    {{{Op::kColor, 0.4, 0}, {Op::kEqualize, 0.6, -1}}},
    {{{Op::kEqualize, 0.4, -1}, {Op::kSolarize, 0.2, 4}}},
    {{{Op::kSolarize, 0.6, 5}, {Op::kAutoContrast, 0.6, -1}}},
    {{{Op::kInvert, 0.6, -1}, {Op::kEqualize, 1.0, -1}}},
    {{{Op::kColor, 0.6, 4}, {Op::kContrast, 1.0, 8}}},
    {{{Op::kEqualize, 0.8, -1}, {Op::kEqualize, 0.6, -1}}},
};

// a * b + c rounded once, as a fused multiply-add: the product of two
// floats is exact in double.
inline float Fma(float a, float b, float c) {
  return static_cast<float>(static_cast<double>(a) * b + c);
}

// torch.linspace(lo, hi, n)[i] in float32, as torch 1.13's CPU kernel
// computes it: start + step * i below the halfway point and end - step *
// (n - 1 - i) above it, each a fused multiply-add in its AVX2 build; the
// elements it writes two vectors of 8 at a time are base + k * step from
// each vector's first element (not fused). Matches torch bit for bit on
// every range the spaces use (tests/python/test_augment_space.py).
float TorchLinspace(double lo, double hi, int n, int i) {
  const float start = static_cast<float>(lo), end = static_cast<float>(hi);
  const float step = (end - start) / static_cast<float>(n - 1);
  const int halfway = n / 2;
  const auto at = [&](int idx) {
    return idx < halfway ? Fma(step, static_cast<float>(idx), start)
                         : Fma(-step, static_cast<float>(n - 1 - idx), end);
  };
  if (i < n / 16 * 16) {
    const int first = i / 8 * 8;
    return at(first) + static_cast<float>(i - first) * step;
  }
  return at(i);
}

// The linspace entry at `level`: torch's own value at a whole level, the
// straight line between the bins at a fractional one (RandAugment's noise).
double Linspace(double lo, double hi, double level, int num_bins) {
  const int bin = static_cast<int>(level);
  if (bin == level) return TorchLinspace(lo, hi, num_bins, bin);
  return static_cast<float>(lo + (hi - lo) * level / (num_bins - 1));
}

// 8 - (torch.arange(n) / ((n - 1) / k)).round().int() at `level`: the
// division in float32, rounding half to even.
double PosterizeBits(double level, int num_bins, double k) {
  const float q =
      static_cast<float>(level) / static_cast<float>((num_bins - 1) / k);
  return 8 - std::nearbyint(q);
}

}  // namespace

std::string_view AugmentOpName(AugmentOp op) {
  switch (op) {
    case Op::kIdentity:
      return "Identity";
    case Op::kShearX:
      return "ShearX";
    case Op::kShearY:
      return "ShearY";
    case Op::kTranslateX:
      return "TranslateX";
    case Op::kTranslateY:
      return "TranslateY";
    case Op::kRotate:
      return "Rotate";
    case Op::kBrightness:
      return "Brightness";
    case Op::kColor:
      return "Color";
    case Op::kContrast:
      return "Contrast";
    case Op::kSharpness:
      return "Sharpness";
    case Op::kPosterize:
      return "Posterize";
    case Op::kSolarize:
      return "Solarize";
    case Op::kAutoContrast:
      return "AutoContrast";
    case Op::kEqualize:
      return "Equalize";
    case Op::kInvert:
      return "Invert";
  }
  return "?";
}

absl::Span<const AugmentOpInfo> SpaceOps(AugmentSpace space) {
  switch (space) {
    case AugmentSpace::kTrivialAugmentWide:
      return kTrivialAugmentOps;
    case AugmentSpace::kRandAugment:
      return absl::MakeConstSpan(kRandAugmentOps, 14);
    case AugmentSpace::kAutoAugment:
      return kAutoAugmentOps;
  }
  return {};
}

double Magnitude(AugmentSpace space, AugmentOp op, double level, int num_bins,
                 int height, int width) {
  const bool wide = space == AugmentSpace::kTrivialAugmentWide;
  switch (op) {
    case Op::kShearX:
    case Op::kShearY:
      return Linspace(0, wide ? 0.99 : 0.3, level, num_bins);
    case Op::kTranslateX:
      return Linspace(0, wide ? 32.0 : 150.0 / 331.0 * width, level, num_bins);
    case Op::kTranslateY:
      return Linspace(0, wide ? 32.0 : 150.0 / 331.0 * height, level, num_bins);
    case Op::kRotate:
      return Linspace(0, wide ? 135.0 : 30.0, level, num_bins);
    case Op::kBrightness:
    case Op::kColor:
    case Op::kContrast:
    case Op::kSharpness:
      return Linspace(0, wide ? 0.99 : 0.9, level, num_bins);
    case Op::kPosterize:
      return PosterizeBits(level, num_bins, wide ? 6.0 : 4.0);
    case Op::kSolarize:
      return Linspace(255.0, 0.0, level, num_bins);
    default:
      return 0.0;
  }
}

void ApplyAugmentOp(const ImageBuffer& image, AugmentOp op, double magnitude,
                    kernels::WarpInterpolation interpolation,
                    const kernels::WarpFill& fill) {
  // Shears turn about the top-left corner (center=[0, 0]) by
  // degrees(atan(magnitude)); translations are int(magnitude) pixels.
  const kernels::WarpCenter corner{true, 0, 0};
  const double shear = std::atan(magnitude) * 180.0 / kPi;
  switch (op) {
    case Op::kIdentity:
      return;
    case Op::kShearX:
      return kernels::Affine(image, 0, 0, 0, 1, shear, 0, interpolation, fill,
                             corner);
    case Op::kShearY:
      return kernels::Affine(image, 0, 0, 0, 1, 0, shear, interpolation, fill,
                             corner);
    case Op::kTranslateX:
      return kernels::Affine(image, 0, std::trunc(magnitude), 0, 1, 0, 0,
                             interpolation, fill);
    case Op::kTranslateY:
      return kernels::Affine(image, 0, 0, std::trunc(magnitude), 1, 0, 0,
                             interpolation, fill);
    case Op::kRotate:
      return kernels::Rotate(image, magnitude, interpolation, fill);
    case Op::kBrightness:
      return kernels::AdjustBrightness(image, 1.0 + magnitude);
    case Op::kColor:
      return kernels::AdjustSaturation(image, 1.0 + magnitude);
    case Op::kContrast:
      return kernels::AdjustContrast(image, 1.0 + magnitude);
    case Op::kSharpness:
      return kernels::AdjustSharpness(image, 1.0 + magnitude);
    case Op::kPosterize:
      return kernels::Posterize(image, static_cast<int>(magnitude));
    case Op::kSolarize:
      return kernels::Solarize(image, magnitude);
    case Op::kAutoContrast:
      return kernels::AutoContrast(image);
    case Op::kEqualize:
      return kernels::Equalize(image);
    case Op::kInvert:
      return kernels::Invert(image);
  }
}

bool IsPositional(AugmentOp op) {
  switch (op) {
    case Op::kShearX:
    case Op::kShearY:
    case Op::kTranslateX:
    case Op::kTranslateY:
    case Op::kRotate:
      return true;
    default:
      return false;
  }
}

void ApplyAugmentOp(const PixelTargets& targets, AugmentOp op, double magnitude,
                    kernels::WarpInterpolation interpolation,
                    const kernels::WarpFill& fill) {
  if (!IsPositional(op)) {
    return ApplyAugmentOp(targets.main(), op, magnitude, interpolation, fill);
  }
  targets.ForEachSpatial(interpolation, fill,
                         [&](const ImageBuffer& image,
                             kernels::WarpInterpolation field_interpolation,
                             const kernels::WarpFill& field_fill) {
                           ApplyAugmentOp(image, op, magnitude,
                                          field_interpolation, field_fill);
                         });
}

AugmentChoice DrawTrivialAugment(int num_bins, SampleRng& rng) {
  const absl::Span<const AugmentOpInfo> ops =
      SpaceOps(AugmentSpace::kTrivialAugmentWide);
  const AugmentOpInfo& info =
      ops[rng.UniformInt(0, static_cast<int64_t>(ops.size()) - 1)];
  AugmentChoice choice;
  choice.op = info.op;
  if (info.has_magnitudes) {
    choice.bin = static_cast<int>(rng.UniformInt(0, num_bins - 1));
    choice.level = choice.bin;
  }
  if (info.is_signed) choice.negative = rng.UniformInt(0, 1) == 1;
  return choice;
}

AugmentChoice DrawRandAugment(int magnitude, int num_bins, double magnitude_std,
                              SampleRng& rng) {
  const absl::Span<const AugmentOpInfo> ops =
      SpaceOps(AugmentSpace::kRandAugment);
  const AugmentOpInfo& info =
      ops[rng.UniformInt(0, static_cast<int64_t>(ops.size()) - 1)];
  AugmentChoice choice;
  choice.op = info.op;
  if (info.has_magnitudes) {
    choice.bin = magnitude;
    choice.level = magnitude;
    if (magnitude_std > 100) {
      choice.level = rng.Uniform(0, magnitude);
    } else if (magnitude_std > 0) {
      // Box-Muller from two uniforms; 1 - u keeps the log's argument > 0.
      const double u1 = 1.0 - rng.Uniform(0, 1), u2 = rng.Uniform(0, 1);
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * kPi * u2);
      choice.level = magnitude + magnitude_std * z;
    }
    choice.level = std::clamp(choice.level, 0.0, num_bins - 1.0);
  }
  if (info.is_signed) choice.negative = rng.UniformInt(0, 1) == 1;
  return choice;
}

absl::Span<const SubPolicy> ImageNetPolicy() { return kImageNet; }

AutoAugmentChoice DrawAutoAugment(SampleRng& rng) {
  const absl::Span<const SubPolicy> policies = ImageNetPolicy();
  AutoAugmentChoice choice;
  choice.policy = static_cast<int>(
      rng.UniformInt(0, static_cast<int64_t>(policies.size()) - 1));
  const SubPolicy& policy = policies[choice.policy];
  const std::array<double, 2> probs = {rng.Uniform(0, 1), rng.Uniform(0, 1)};
  const std::array<int64_t, 2> signs = {rng.UniformInt(0, 1),
                                        rng.UniformInt(0, 1)};
  for (int i = 0; i < 2; ++i) {
    choice.applies[i] = probs[i] <= policy[i].p;
    bool is_signed = false;
    for (const AugmentOpInfo& info : SpaceOps(AugmentSpace::kAutoAugment)) {
      if (info.op == policy[i].op) is_signed = info.is_signed;
    }
    choice.negative[i] = is_signed && signs[i] == 0;
  }
  return choice;
}

}  // namespace stoker::pipeline
