// center_crop {size: n | [h, w]}: keeps the centre h x w of the image, with
// torchvision's rounding; a crop larger than the image is padded with
// zeros, as torchvision's CenterCrop pads.

#include <cmath>
#include <memory>

#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

// Offset of a crop of `crop` pixels centred in `size` pixels.
int CenterOffset(int size, int crop) {
  // torchvision pads (crop - size) // 2 before, then crops at 0.
  if (crop > size) return -((crop - size) / 2);
  // int(round((size - crop) / 2.0)), rounding half to even.
  return static_cast<int>(std::nearbyint((size - crop) / 2.0));
}

class CenterCropOp final : public GeometryOp {
 public:
  CenterCropOp(int height, int width) : height_(height), width_(width) {}
  SizeEffect size_effect() const override {
    return {SizeEffect::kFixes, height_, width_};
  }

  absl::Status Apply(View& view, SampleRng& rng) const override {
    CropView(CenterOffset(view.out_height, height_),
             CenterOffset(view.out_width, width_), height_, width_, &view);
    return absl::OkStatus();
  }

 private:
  const int height_, width_;
};

OpDef MakeCenterCropDef() {
  OpDef def;
  def.name = "center_crop";
  def.kind = OpKind::kGeometry;
  def.doc =
      "Crops the centre of the image: n gives n x n, or [h, w]. A crop "
      "larger than the image is padded with zeros, as torchvision's.";
  def.args = {ArgSpec::Required("size", ArgType::kIntOrPair,
                                "Crop side, or [height, width].")
                  .Between(1, kMaxImageSide)};
  def.example = "center_crop: {size: 224}";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    absl::StatusOr<std::vector<int>> size =
        ParseSizeArg("center_crop", "size", args);
    if (!size.ok()) return size.status();
    return AnyOp(std::make_unique<CenterCropOp>(size->front(), size->back()));
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeCenterCropDef);

}  // namespace stoker::pipeline
