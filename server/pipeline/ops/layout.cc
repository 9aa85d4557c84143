// layout: chw | hwc: sets the order of the image tensor's dimensions. Its
// YAML form is a scalar, `- layout: chw`, which fills the argument `value`.

#include <memory>

#include "absl/strings/str_cat.h"
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
  def.doc = "Sets the image layout: chw (channels first) or hwc.";
  def.args = {{"value", ArgType::kString, true, std::nullopt, "chw or hwc."}};
  def.scalar_arg = "value";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<std::unique_ptr<Op>> {
    const std::string& value = *FindArg<std::string>(args, "value");
    if (value == "chw") return std::make_unique<LayoutOp>(Layout::kChw);
    if (value == "hwc") return std::make_unique<LayoutOp>(Layout::kHwc);
    return absl::InvalidArgumentError(absl::StrCat(
        "op 'layout': value must be chw or hwc, not '", value, "'"));
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeLayoutDef);

}  // namespace stoker::pipeline
