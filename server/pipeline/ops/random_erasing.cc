// random_erasing {p: 0.5, scale: [0.02, 0.33], ratio: [0.3, 3.3],
// value: [0], random: false, mean, std}: torchvision's RandomErasing, a
// tensor op on the written output (after normalize and layout), in its
// dtype and layout. Per image, as RandomErasing.forward and get_params:
// a Bernoulli with p; then up to 10 tries of an area fraction uniform in
// scale and an aspect ratio log-uniform in ratio, h = round(sqrt(area *
// ratio)), w = round(sqrt(area / ratio)) (Python's round), until h < height
// and w < width; then the top row uniform in [0, height - h] and the left
// column in [0, width - w]; the box is filled with `value` (one, or one
// per channel) in normalized space, or with N(0, 1) per element when
// `random`. No try fits: the image stays as it is.
//
// On a uint8 output (the trainer normalizes, e.g. cuda_ipc on the GPU)
// `value` is written as the level that normalizes to it,
// round(255 * (mean + value * std)) clamped to [0, 255], with the `mean`
// and `std` the trainer uses (default 0 and 1); `random` is refused there,
// as its values are not levels.

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/pipeline/kernel_op.h"
#include "server/tensor/float16.h"

namespace stoker::pipeline {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct ErasingParams {
  double p;
  std::array<double, 2> scale, log_ratio;
  std::array<double, 3> value;  // Normalized space.
  bool random;
  std::array<double, 3> mean, std;  // For uint8 outputs.
  bool levels_given;                // mean or std was given.
};

class RandomErasingOp final : public TensorOp {
 public:
  explicit RandomErasingOp(const ErasingParams& params) : params_(params) {}

  absl::Status Check(const OutputFormat& format) const override {
    if (format.dtype == tensor::DType::kUint8 && params_.random) {
      return absl::InvalidArgumentError(
          "random_erasing: random: true needs a float output (normalize "
          "with dtype float32 or float16); a uint8 output holds levels");
    }
    if (format.dtype != tensor::DType::kUint8 && params_.levels_given) {
      return absl::InvalidArgumentError(
          "random_erasing: mean and std are for uint8 outputs; a float "
          "output is normalized already, so `value` is written as it is");
    }
    return absl::OkStatus();
  }

  absl::Status Apply(const TensorRef& out, SampleRng& rng) const override {
    if (!rng.Bernoulli(params_.p)) return absl::OkStatus();
    const int img_h = out.height, img_w = out.width;
    const double area = static_cast<double>(img_h) * img_w;
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double erase_area =
          area * rng.Uniform(params_.scale[0], params_.scale[1]);
      const double aspect =
          std::exp(rng.Uniform(params_.log_ratio[0], params_.log_ratio[1]));
      // Compared as doubles: an extreme ratio must not overflow the cast.
      const double hd = std::nearbyint(std::sqrt(erase_area * aspect));
      const double wd = std::nearbyint(std::sqrt(erase_area / aspect));
      if (!(hd < img_h && wd < img_w)) continue;
      const int h = static_cast<int>(hd), w = static_cast<int>(wd);
      const int top = static_cast<int>(rng.UniformInt(0, img_h - h));
      const int left = static_cast<int>(rng.UniformInt(0, img_w - w));
      Erase(out, top, left, h, w, rng);
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }

 private:
  // The value element (c, y, x) of the box gets: `value`, or N(0, 1)
  // drawn in [c, y, x] order (torchvision's v of shape [c, h, w]).
  void Erase(const TensorRef& out, int top, int left, int h, int w,
             SampleRng& rng) const {
    const int channels = out.channels;
    std::vector<float> box(static_cast<size_t>(channels) * h * w);
    for (int c = 0; c < channels; ++c) {
      float* plane = box.data() + static_cast<size_t>(c) * h * w;
      if (!params_.random) {
        std::fill(plane, plane + static_cast<size_t>(h) * w,
                  static_cast<float>(params_.value[c]));
        continue;
      }
      for (size_t k = 0; k < static_cast<size_t>(h) * w; ++k) {
        // Box-Muller; 1 - u keeps the log's argument above 0.
        const double u1 = 1.0 - rng.Uniform(0, 1), u2 = rng.Uniform(0, 1);
        plane[k] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                      std::cos(2 * kPi * u2));
      }
    }
    std::array<uint8_t, 3> level{};
    for (int c = 0; c < channels; ++c) {
      const double v =
          255.0 * (params_.mean[c] + params_.value[c] * params_.std[c]);
      level[c] =
          static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0, 255.0));
    }
    for (int c = 0; c < channels; ++c) {
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          const size_t index =
              out.layout == Layout::kChw
                  ? (static_cast<size_t>(c) * out.height + top + y) *
                            out.width +
                        left + x
                  : (static_cast<size_t>(top + y) * out.width + left + x) *
                            channels +
                        c;
          const float v = box[(static_cast<size_t>(c) * h + y) * w + x];
          switch (out.dtype) {
            case tensor::DType::kFloat32:
              reinterpret_cast<float*>(out.data)[index] = v;
              break;
            case tensor::DType::kFloat16:
              reinterpret_cast<uint16_t*>(out.data)[index] =
                  tensor::FloatToHalf(v);
              break;
            default:
              out.data[index] = level[c];
              break;
          }
        }
      }
    }
  }

  const ErasingParams params_;
};

// A [lo, hi] argument, or InvalidArgument naming it.
absl::StatusOr<std::array<double, 2>> ReadRange(const OpArgs& args,
                                                const char* name) {
  const std::vector<double>& v = *FindArg<std::vector<double>>(args, name);
  if (v.size() != 2 || !(v[0] <= v[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("op 'random_erasing': argument '", name,
                     "' must be [lo, hi] with lo <= hi"));
  }
  return std::array<double, 2>{v[0], v[1]};
}

// A per-channel argument of 1 or 3 values, or `fallback` when absent.
absl::StatusOr<std::array<double, 3>> ReadChannels(const OpArgs& args,
                                                   const char* name,
                                                   double fallback) {
  const auto* v = FindArg<std::vector<double>>(args, name);
  if (v == nullptr) return std::array<double, 3>{fallback, fallback, fallback};
  if (v->size() != 1 && v->size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("op 'random_erasing': argument '", name,
                     "' must have 1 or 3 values, not ", v->size()));
  }
  const bool one = v->size() == 1;
  return std::array<double, 3>{(*v)[0], (*v)[one ? 0 : 1], (*v)[one ? 0 : 2]};
}

absl::StatusOr<AnyOp> MakeRandomErasing(const OpArgs& args) {
  ErasingParams params;
  params.p = *FindArg<double>(args, "p");
  params.random = *FindArg<bool>(args, "random");
  params.levels_given = FindArg<std::vector<double>>(args, "mean") != nullptr ||
                        FindArg<std::vector<double>>(args, "std") != nullptr;
  absl::StatusOr<std::array<double, 2>> scale = ReadRange(args, "scale");
  if (!scale.ok()) return scale.status();
  absl::StatusOr<std::array<double, 2>> ratio = ReadRange(args, "ratio");
  if (!ratio.ok()) return ratio.status();
  params.scale = *scale;
  // torch.log(torch.tensor(ratio)): the logs in float32.
  params.log_ratio = {std::log(static_cast<float>((*ratio)[0])),
                      std::log(static_cast<float>((*ratio)[1]))};
  for (const auto& [name, fallback, out] :
       {std::tuple{"value", 0.0, &params.value},
        std::tuple{"mean", 0.0, &params.mean},
        std::tuple{"std", 1.0, &params.std}}) {
    absl::StatusOr<std::array<double, 3>> v =
        ReadChannels(args, name, fallback);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  return AnyOp(
      std::unique_ptr<TensorOp>(std::make_unique<RandomErasingOp>(params)));
}

OpDef MakeRandomErasingDef() {
  OpDef def;
  def.name = "random_erasing";
  def.kind = OpKind::kTensor;
  def.binds_field = true;
  def.doc =
      "Erases a random rectangle of the written output with probability p, "
      "as torchvision's RandomErasing after Normalize: `value` in normalized "
      "space, or N(0, 1) per element with `random`. On a uint8 output the "
      "value is written as round(255 * (mean + value * std)).";
  def.args = {
      ProbabilityArg(0.5),
      ArgSpec::Optional("scale", ArgType::kFloatList,
                        ArgValue(std::vector<double>{0.02, 0.33}),
                        "[lo, hi]: range of the box's area as a fraction of "
                        "the image's.")
          .Between(0, 1),
      ArgSpec::Optional("ratio", ArgType::kFloatList,
                        ArgValue(std::vector<double>{0.3, 3.3}),
                        "[lo, hi]: range of the box's aspect ratio (height / "
                        "width), drawn log-uniformly.")
          .Above(0),
      ArgSpec::Optional("value", ArgType::kFloatList,
                        ArgValue(std::vector<double>{0.0}),
                        "Fill in normalized space: one value, or one per "
                        "channel."),
      ArgSpec::Optional("random", ArgType::kBool, ArgValue(false),
                        "Fill with N(0, 1) per element (torchvision's "
                        "value='random'); float outputs only."),
      ArgSpec::Optional("mean", ArgType::kFloatList, std::nullopt,
                        "uint8 outputs: the mean the trainer normalizes "
                        "with (0-1 scale), to turn `value` into a level."),
      ArgSpec::Optional("std", ArgType::kFloatList, std::nullopt,
                        "uint8 outputs: the std the trainer normalizes with.")
          .Above(0),
  };
  def.example = "random_erasing: {p: 0.25}";
  def.factory = MakeRandomErasing;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRandomErasingDef);

}  // namespace stoker::pipeline
