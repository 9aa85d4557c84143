// random_flip {p: 0.5}: mirrors the image left-right with probability p,
// like torchvision's RandomHorizontalFlip.

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/pipeline/op.h"

namespace stoker::pipeline {
namespace {

class RandomFlipOp final : public Op {
 public:
  explicit RandomFlipOp(double p) : p_(p) {}

  OpStage stage() const override { return OpStage::kGeometry; }

  absl::Status Apply(ImageState& state, SampleRng& rng) const override {
    if (rng.Bernoulli(p_)) state.view.flip = !state.view.flip;
    return absl::OkStatus();
  }

 private:
  const double p_;
};

OpDef MakeRandomFlipDef() {
  OpDef def;
  def.name = "random_flip";
  def.doc = "Flips the image horizontally with probability p.";
  def.args = {{"p", ArgType::kFloat, false, ArgValue(0.5),
               "Probability of a flip, in [0, 1]."}};
  def.factory = [](const OpArgs& args) -> absl::StatusOr<std::unique_ptr<Op>> {
    const double p = *FindArg<double>(args, "p");
    if (!(p >= 0.0 && p <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op 'random_flip': argument 'p' must be in [0, 1], not ", p));
    }
    return std::make_unique<RandomFlipOp>(p);
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeRandomFlipDef);

}  // namespace stoker::pipeline
