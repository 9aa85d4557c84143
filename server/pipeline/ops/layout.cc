// layout: chw | hwc: sets the order of the image tensor's dimensions. Its
// YAML form is a scalar, `- layout: chw`, which fills the argument `value`.

#include <memory>

#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

class LayoutOp final : public FormatOp {
 public:
  explicit LayoutOp(Layout layout) : layout_(layout) {}

  void Apply(OutputFormat& format) const override { format.layout = layout_; }

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
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    // ResolveArgs let only the declared choices through.
    const std::string& value = *FindArg<std::string>(args, "value");
    return AnyOp(std::make_unique<LayoutOp>(value == "chw" ? Layout::kChw
                                                           : Layout::kHwc));
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeLayoutDef);

}  // namespace stoker::pipeline
