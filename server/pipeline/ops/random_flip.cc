// random_flip {p: 0.5}: mirrors the image left-right with probability p,
// like torchvision's RandomHorizontalFlip.

#include <memory>

#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

class RandomFlipOp final : public GeometryOp {
 public:
  explicit RandomFlipOp(double p) : p_(p) {}

  absl::Status Apply(View& view, SampleRng& rng) const override {
    if (rng.Bernoulli(p_)) view.flip = !view.flip;
    return absl::OkStatus();
  }

 private:
  const double p_;
};

OpDef MakeRandomFlipDef() {
  OpDef def;
  def.name = "random_flip";
  def.kind = OpKind::kGeometry;
  def.doc = "Flips the image horizontally with probability p.";
  def.args = {ArgSpec::Optional("p", ArgType::kFloat, ArgValue(0.5),
                                "Probability of a flip.")
                  .Between(0, 1)};
  def.example = "random_flip: {p: 0.5}";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    return AnyOp(std::make_unique<RandomFlipOp>(*FindArg<double>(args, "p")));
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRandomFlipDef);

}  // namespace stoker::pipeline
