// layout: chw | hwc: sets the order of the image tensor's dimensions. Its
// YAML form is a scalar, `- layout: chw`, which fills the argument `value`.

#include <memory>

#include "server/pipeline/op.h"

namespace stoker::pipeline {
namespace {

class LayoutOp final : public Op {
 public:
  explicit LayoutOp(Layout layout) : layout_(layout) {}

  OpStage stage() const override { return OpStage::kFormat; }

  absl::Status Apply(ImageState& state, SampleRng& rng) const override {
    state.format.layout = layout_;
    return absl::OkStatus();
  }

 private:
  const Layout layout_;
};

OpDef MakeLayoutDef() {
  OpDef def;
  def.name = "layout";
  def.kind = OpKind::kFormat;
  def.doc = "Sets the image layout: chw (channels first) or hwc.";
  def.args = {ArgSpec::Required("value", ArgType::kString,
                                "Order of the image tensor's dimensions.")
                  .OneOf({"chw", "hwc"})};
  def.scalar_arg = "value";
  def.example = "layout: chw";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<std::unique_ptr<Op>> {
    // ResolveArgs let only the declared choices through.
    const std::string& value = *FindArg<std::string>(args, "value");
    return std::make_unique<LayoutOp>(value == "chw" ? Layout::kChw
                                                     : Layout::kHwc);
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeLayoutDef);

}  // namespace stoker::pipeline
