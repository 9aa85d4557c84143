// normalize {mean, std, dtype: float32}: sets the image's output dtype and,
// for float outputs, torchvision's normalization (x / 255 - mean) / std.
// Without mean and std a float output is x / 255 (ToTensor); uint8 output
// passes the pixels through and takes no mean or std.

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

class NormalizeOp final : public FormatOp {
 public:
  explicit NormalizeOp(const OutputFormat& format) : format_(format) {}

  void Apply(OutputFormat& format) const override {
    format.dtype = format_.dtype;
    format.mean = format_.mean;
    format.std = format_.std;
  }

 private:
  const OutputFormat format_;  // The layout field is not used.
};

absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("op 'normalize': ", why));
}

absl::StatusOr<AnyOp> MakeNormalize(const OpArgs& args) {
  OutputFormat format;
  const std::string& dtype = *FindArg<std::string>(args, "dtype");
  if (dtype == "float32") {
    format.dtype = tensor::DType::kFloat32;
  } else if (dtype == "float16") {
    format.dtype = tensor::DType::kFloat16;
  } else {
    // ResolveArgs let only the declared choices through.
    format.dtype = tensor::DType::kUint8;
  }
  const auto* mean = FindArg<std::vector<double>>(args, "mean");
  const auto* std = FindArg<std::vector<double>>(args, "std");
  if ((mean == nullptr) != (std == nullptr)) {
    return Invalid("arguments 'mean' and 'std' go together");
  }
  if (mean != nullptr) {
    if (mean->size() != 3 || std->size() != 3) {
      return Invalid("arguments 'mean' and 'std' need 3 values each (RGB)");
    }
    for (int c = 0; c < 3; ++c) {
      format.mean[c] = (*mean)[c];
      format.std[c] = (*std)[c];
    }
  }
  if (absl::Status s = PixelConverter::Check(format); !s.ok()) {
    return Invalid(s.message());
  }
  return AnyOp(std::make_unique<NormalizeOp>(format));
}

OpDef MakeNormalizeDef() {
  OpDef def;
  def.name = "normalize";
  def.kind = OpKind::kFormat;
  def.doc =
      "Sets the image dtype; float outputs are (x / 255 - mean) / std per "
      "channel, as torchvision's ToTensor and Normalize.";
  def.args = {
      ArgSpec::Optional("mean", ArgType::kFloatList, std::nullopt,
                        "Per-channel mean (R, G, B) on the 0-1 scale; "
                        "with std."),
      ArgSpec::Optional("std", ArgType::kFloatList, std::nullopt,
                        "Per-channel standard deviation (R, G, B); with "
                        "mean.")
          .Above(0),
      ArgSpec::Optional("dtype", ArgType::kString,
                        ArgValue(std::string("float32")),
                        "Output dtype; uint8 passes the pixels through and "
                        "takes no mean or std.")
          .OneOf({"float32", "float16", "uint8"}),
  };
  def.example =
      "normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}";
  def.factory = MakeNormalize;
  return def;
}

}  // namespace

STOKER_REGISTER_OP(MakeNormalizeDef);

}  // namespace stoker::pipeline
