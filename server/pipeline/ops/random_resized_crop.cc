// random_resized_crop {size, scale: [0.08, 1.0], ratio: [3/4, 4/3],
// interpolation}: crops a
// random part of the image and resizes it to `size`, with the semantics of
// torchvision's RandomResizedCrop.get_params on the current view size.

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

struct Crop {
  int top, left, height, width;
};

class RandomResizedCropOp final : public GeometryOp {
 public:
  RandomResizedCropOp(int height, int width, const std::vector<double>& scale,
                      const std::vector<double>& ratio,
                      Interpolation interpolation)
      : height_(height),
        width_(width),
        interpolation_(interpolation),
        scale_{scale[0], scale[1]},
        ratio_{ratio[0], ratio[1]},
        log_ratio_{std::log(ratio[0]), std::log(ratio[1])} {}
  SizeEffect size_effect() const override {
    return {SizeEffect::kFixes, height_, width_};
  }

  absl::Status Apply(View& view, SampleRng& rng) const override {
    const Crop crop = Choose(view.out_height, view.out_width, rng);
    CropView(crop.top, crop.left, crop.height, crop.width, &view);
    view.out_height = height_;
    view.out_width = width_;
    view.interpolation = interpolation_;
    return absl::OkStatus();
  }

 private:
  Crop Choose(int height, int width, SampleRng& rng) const {
    const double area = static_cast<double>(height) * width;
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = area * rng.Uniform(scale_[0], scale_[1]);
      const double aspect = std::exp(rng.Uniform(log_ratio_[0], log_ratio_[1]));
      // Python's round() rounds half to even, as nearbyint does.
      const int w =
          static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect)));
      const int h =
          static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect)));
      if (0 < w && w <= width && 0 < h && h <= height) {
        const int top = static_cast<int>(rng.UniformInt(0, height - h));
        const int left = static_cast<int>(rng.UniformInt(0, width - w));
        return {top, left, h, w};
      }
    }
    // Fallback: a centre crop, as large as the ratio range allows.
    const double in_ratio = static_cast<double>(width) / height;
    int w = width, h = height;
    if (in_ratio < ratio_[0]) {
      h = static_cast<int>(std::nearbyint(w / ratio_[0]));
    } else if (in_ratio > ratio_[1]) {
      w = static_cast<int>(std::nearbyint(h * ratio_[1]));
    }
    return {(height - h) / 2, (width - w) / 2, h, w};
  }

  const int height_, width_;
  const Interpolation interpolation_;
  const double scale_[2];
  const double ratio_[2];
  const double log_ratio_[2];
};

// InvalidArgument unless `range` is [lo, hi] with lo <= hi; the bounds on
// each value are declared with the argument.
absl::Status CheckRange(absl::string_view arg,
                        const std::vector<double>& range) {
  if (range.size() != 2 || !(range[0] <= range[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("op 'random_resized_crop': argument '", arg,
                     "' must be [lo, hi] with lo <= hi"));
  }
  return absl::OkStatus();
}

OpDef MakeRandomResizedCropDef() {
  OpDef def;
  def.name = "random_resized_crop";
  def.kind = OpKind::kGeometry;
  def.doc =
      "Crops a random area (fraction `scale` of the image, aspect ratio "
      "log-uniform in `ratio`) and resizes it to `size`, as torchvision's "
      "RandomResizedCrop: 10 tries, then a centre crop.";
  def.args = {
      ArgSpec::Required("size", ArgType::kIntOrPair,
                        "Output side, or [height, width].")
          .Between(1, kMaxImageSide),
      ArgSpec::Optional("scale", ArgType::kFloatList,
                        ArgValue(std::vector<double>{0.08, 1.0}),
                        "[lo, hi]: range of the crop's area as a fraction of "
                        "the image's.")
          .Above(0)
          .AtMost(1),
      ArgSpec::Optional("ratio", ArgType::kFloatList,
                        ArgValue(std::vector<double>{3.0 / 4.0, 4.0 / 3.0}),
                        "[lo, hi]: range of the crop's aspect ratio (width / "
                        "height).")
          .Above(0),
      InterpolationArg(),
  };
  def.example = "random_resized_crop: {size: 224, scale: [0.08, 1]}";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    absl::StatusOr<std::vector<int>> size =
        ParseSizeArg("random_resized_crop", "size", args);
    if (!size.ok()) return size.status();
    const auto& scale = *FindArg<std::vector<double>>(args, "scale");
    const auto& ratio = *FindArg<std::vector<double>>(args, "ratio");
    if (absl::Status s = CheckRange("scale", scale); !s.ok()) return s;
    if (absl::Status s = CheckRange("ratio", ratio); !s.ok()) return s;
    return AnyOp(std::make_unique<RandomResizedCropOp>(
        size->front(), size->back(), scale, ratio,
        ParseInterpolationArg(args)));
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRandomResizedCropDef);

}  // namespace stoker::pipeline
