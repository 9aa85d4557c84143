// decode_image {field: image}: names the record field that holds the
// image. The pipeline picks its decoder by content (JPEG or PNG), reads the
// header and points the view at the whole image; the pixels are decoded
// later, once, for the final view only. decode_jpeg is the same op under
// its old name, without arguments (the field is `image`), so that existing
// configs keep working; it decodes a PNG too (ImageNet has a PNG named
// .JPEG).

#include <string>
#include <utility>

#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeDecodeSpec(const OpArgs& args) {
  const std::string* field = FindArg<std::string>(args, kFieldArg);
  return DecodeSpec{field != nullptr ? *field : "image"};
}

OpDef MakeDecodeImageDef() {
  OpDef def;
  def.name = "decode_image";
  def.kind = OpKind::kDecode;
  def.binds_field = true;
  def.doc =
      "Decodes a JPEG, PNG, WebP or TIFF, chosen by content, to RGB as "
      "PIL's convert(\"RGB\") does (JPEG grayscale and CMYK are converted; "
      "a palette is expanded, gray replicated, alpha dropped, 16 bits cut to "
      "8). Must be the first op. Only the part of the image that the later "
      "ops keep is decoded (a TIFF is decoded whole, then cropped); a "
      "JPEG at the smallest DCT scale (1/8, 1/4, 1/2 or 1) that covers the "
      "output size.";
  def.example = "decode_image";
  def.factory = MakeDecodeSpec;
  return def;
}

// The old name takes no arguments, as before: it decodes the field "image".
OpDef MakeDecodeJpegDef() {
  OpDef def;
  def.name = "decode_jpeg";
  def.kind = OpKind::kDecode;
  def.doc =
      "The old name of decode_image, kept for existing configs; the same op "
      "on the field `image` (it decodes every format decode_image does).";
  def.example = "decode_jpeg";
  def.factory = MakeDecodeSpec;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeDecodeImageDef);
STOKER_REGISTER_OP(MakeDecodeJpegDef);

}  // namespace stoker::pipeline
