// decode_jpeg {}: reads the JPEG header and points the view at the whole
// image. The pixels are decoded later, once, for the final view only.

#include <memory>

#include "server/pipeline/op.h"

namespace stoker::pipeline {
namespace {

class DecodeJpegOp final : public Op {
 public:
  OpStage stage() const override { return OpStage::kDecode; }
  SizeEffect size_effect() const override { return {SizeEffect::kVaries}; }

  absl::Status Apply(ImageState& state, SampleRng& rng) const override {
    if (absl::Status s = state.decoder->ReadHeader(state.jpeg); !s.ok()) {
      return s;
    }
    state.view = FullView(state.decoder->width(), state.decoder->height());
    return absl::OkStatus();
  }
};

OpDef MakeDecodeJpegDef() {
  OpDef def;
  def.name = "decode_jpeg";
  def.kind = OpKind::kDecode;
  def.doc =
      "Decodes a JPEG to RGB (grayscale and CMYK are converted). Must be the "
      "first op. Only the part of the image that the later ops keep is "
      "decoded, at the smallest DCT scale (1/8, 1/4, 1/2 or 1) that covers "
      "the output size.";
  def.example = "decode_jpeg";
  def.factory = [](const OpArgs&) -> absl::StatusOr<std::unique_ptr<Op>> {
    return std::make_unique<DecodeJpegOp>();
  };
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeDecodeJpegDef);

}  // namespace stoker::pipeline
