// decode_image {field: image}: names the record field that holds the
// image. The pipeline picks its decoder by content (JPEG or PNG), reads the
// header and points the view at the whole image; the pixels are decoded
// later, once, for the final view only. decode_jpeg is the same op under
// its old name, without arguments (the field is `image`), so that existing
// configs keep working; it decodes a PNG too (ImageNet has a PNG named
// .JPEG). `interpolation: nearest` marks a mask (op.h, DecodeSpec).

#include <string>
#include <utility>

#include "server/pipeline/registry.h"
#include "server/pipeline/warp_op.h"

namespace stoker::pipeline {
namespace {

absl::StatusOr<AnyOp> MakeDecodeSpec(const OpArgs& args) {
  DecodeSpec spec;
  const std::string* field = FindArg<std::string>(args, kFieldArg);
  spec.field = field != nullptr ? *field : "image";
  const std::string* interpolation =
      FindArg<std::string>(args, "interpolation");
  spec.nearest = interpolation != nullptr && *interpolation == "nearest";
  absl::StatusOr<kernels::WarpFill> fill = ReadFillArg("decode_image", args);
  if (!fill.ok()) return fill.status();
  spec.fill = *fill;
  return spec;
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
      "8). Decode ops come first; several decode "
      "several spatial fields of one size (an image and its mask), which "
      "every geometry op and warp transforms alike, each its own output. "
      "Only the part of the image that the later ops keep is decoded (a TIFF "
      "is decoded whole, then cropped); a JPEG at the smallest DCT scale (1/8, 1/4, 1/2 or 1) that covers the output "
      "size.";
  def.args = {
      ArgSpec::Optional("interpolation", ArgType::kString,
                        ArgValue(std::string("bilinear")),
                        "nearest: the field holds class ids (a mask): "
                        "rendered and warped without averaging, written as "
                        "uint8 (normalize does not apply), bound by no pixel "
                        "or tensor op; bilinear: an image.")
          .OneOf({"bilinear", "nearest"}),
      ArgSpec::Optional("fill", ArgType::kFloatList, std::nullopt,
                        "Colour that warps bound to another field give this "
                        "field's pixels mapped from outside the image: one "
                        "value, or one per channel (0-255); not given: 0 for "
                        "a nearest field, else the warp's fill.")
          .Between(0, 255),
  };
  def.example = "decode_image: {field: mask, interpolation: nearest}";
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
