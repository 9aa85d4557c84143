// decode_image {}: picks the decoder by the image's content (JPEG or PNG),
// reads the header and points the view at the whole image. The pixels are
// decoded later, once, for the final view only. decode_jpeg is the same op
// under its old name, so that existing configs keep working; it decodes a
// PNG too (ImageNet has a PNG named .JPEG).

#include <memory>

#include "server/pipeline/op.h"

namespace stoker::pipeline {
namespace {

class DecodeImageOp final : public Op {
 public:
  OpStage stage() const override { return OpStage::kDecode; }
  SizeEffect size_effect() const override { return {SizeEffect::kVaries}; }

  absl::Status Apply(ImageState& state, SampleRng& rng) const override {
    absl::StatusOr<ImageDecoder*> decoder = state.decoders->Open(state.encoded);
    if (!decoder.ok()) return decoder.status();
    state.decoder = *decoder;
    state.view = FullView(state.decoder->width(), state.decoder->height());
    return absl::OkStatus();
  }
};

OpDef MakeDef(std::string name, std::string doc) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::kDecode;
  def.doc = std::move(doc);
  def.example = std::move(name);
  def.factory = [](const OpArgs&) -> absl::StatusOr<std::unique_ptr<Op>> {
    return std::make_unique<DecodeImageOp>();
  };
  return def;
}

OpDef MakeDecodeImageDef() {
  return MakeDef(
      "decode_image",
      "Decodes a JPEG or PNG, chosen by content, to RGB (JPEG grayscale and "
      "CMYK are converted; a PNG palette is expanded, gray replicated, alpha "
      "dropped, 16 bits cut to 8). Must be the first op. Only the part of "
      "the image that the later ops keep is decoded; a JPEG at the smallest "
      "DCT scale (1/8, 1/4, 1/2 or 1) that covers the output size.");
}

OpDef MakeDecodeJpegDef() {
  return MakeDef("decode_jpeg",
                 "The old name of decode_image, kept for existing configs; "
                 "the same op (it decodes PNG too).");
}

}  // namespace

STOKER_REGISTER_OP(MakeDecodeImageDef);
STOKER_REGISTER_OP(MakeDecodeJpegDef);

}  // namespace stoker::pipeline
