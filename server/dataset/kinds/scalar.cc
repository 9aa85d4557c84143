// Field kinds `int64`, `float32` and `float64`: one little-endian scalar
// per record (a class label, a regression target, a weight). One template,
// three registrations.

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

template <tensor::DType kDType>
class ScalarKind final : public FieldKind {
 public:
  std::string_view name() const override { return tensor::DTypeName(kDType); }
  Passthrough passthrough(const FieldSpec&) const override {
    return Passthrough::kDense;
  }

  absl::Status CheckSpec(FieldSpec* spec) const override {
    spec->dtype = kDType;
    spec->shape = {};
    return absl::OkStatus();
  }

  absl::Status CheckValue(const FieldSpec& spec,
                          std::string_view value) const override {
    const size_t size = tensor::DTypeSize(kDType);
    if (value.size() == size) return absl::OkStatus();
    return absl::DataLossError(
        absl::StrCat("field '", spec.name, "' has ", value.size(), " bytes, ",
                     std::string(name()), " needs ", size));
  }

  absl::StatusOr<std::string> FromText(const FieldSpec& spec,
                                       std::string_view text) const override {
    const absl::string_view t =
        absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
    bool ok = false;
    std::string out(tensor::DTypeSize(kDType), '\0');
    if constexpr (kDType == tensor::DType::kInt64) {
      int64_t v = 0;
      ok = absl::SimpleAtoi(t, &v);
      std::memcpy(out.data(), &v, sizeof(v));
    } else if constexpr (kDType == tensor::DType::kFloat32) {
      float v = 0;
      ok = absl::SimpleAtof(t, &v);
      std::memcpy(out.data(), &v, sizeof(v));
    } else {
      double v = 0;
      ok = absl::SimpleAtod(t, &v);
      std::memcpy(out.data(), &v, sizeof(v));
    }
    if (ok) return out;
    return absl::InvalidArgumentError(
        absl::StrCat("field '", spec.name, "': '", t, "' is not ",
                     kDType == tensor::DType::kInt64 ? "an " : "a ",
                     std::string(name())));
  }
};

std::unique_ptr<FieldKind> MakeInt64Kind() {
  return std::make_unique<ScalarKind<tensor::DType::kInt64>>();
}

std::unique_ptr<FieldKind> MakeFloat32Kind() {
  return std::make_unique<ScalarKind<tensor::DType::kFloat32>>();
}

std::unique_ptr<FieldKind> MakeFloat64Kind() {
  return std::make_unique<ScalarKind<tensor::DType::kFloat64>>();
}

}  // namespace

STOKER_REGISTER_FIELD_KIND(MakeInt64Kind);
STOKER_REGISTER_FIELD_KIND(MakeFloat32Kind);
STOKER_REGISTER_FIELD_KIND(MakeFloat64Kind);

}  // namespace stoker::dataset
