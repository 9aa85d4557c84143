// resize {size: n | [h, w], interpolation}: sets the output size. With one
// number the shorter side becomes n and the longer keeps the aspect ratio,
// as in torchvision's Resize(n); with [h, w] the output is exactly h x w.

#include <memory>
#include <utility>

#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

class ResizeOp final : public GeometryOp {
 public:
  ResizeOp(std::vector<int> size, Interpolation interpolation)
      : size_(std::move(size)), interpolation_(interpolation) {}

  SizeEffect size_effect() const override {
    if (size_.size() == 1) return {SizeEffect::kVaries};
    return {SizeEffect::kFixes, size_[0], size_[1]};
  }

  absl::Status Apply(View& view, SampleRng& rng) const override {
    view.interpolation = interpolation_;
    if (size_.size() == 2) {
      view.out_height = size_[0];
      view.out_width = size_[1];
      return absl::OkStatus();
    }
    // torchvision: long = int(size * long / short), truncating.
    const bool wide = view.out_width > view.out_height;
    const int shorter = wide ? view.out_height : view.out_width;
    const int longer = wide ? view.out_width : view.out_height;
    const int new_longer = static_cast<int>(
        static_cast<double>(static_cast<int64_t>(size_[0]) * longer) / shorter);
    view.out_width = wide ? new_longer : size_[0];
    view.out_height = wide ? size_[0] : new_longer;
    return absl::OkStatus();
  }

 private:
  const std::vector<int> size_;  // [shorter side] or [height, width].
  const Interpolation interpolation_;
};

OpDef MakeResizeDef() {
  OpDef def;
  def.name = "resize";
  def.kind = OpKind::kGeometry;
  def.doc =
      "Resizes the image: n sets the shorter side to n keeping the aspect "
      "ratio; [h, w] sets the size exactly.";
  def.args = {ArgSpec::Required("size", ArgType::kIntOrPair,
                                "Shorter side, or [height, width].")
                  .Between(1, kMaxImageSide),
              InterpolationArg()};
  def.example = "resize: {size: 256}";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    absl::StatusOr<std::vector<int>> size =
        ParseSizeArg("resize", "size", args);
    if (!size.ok()) return size.status();
    return AnyOp(std::make_unique<ResizeOp>(*std::move(size),
                                            ParseInterpolationArg(args)));
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeResizeDef);

}  // namespace stoker::pipeline
