// Field kind `ndarray`: a C-order array of a declared dtype and shape
// (token ids, boxes, embeddings). With shape[0] == -1 a value is any number
// of whole rows of prod(shape[1:]) elements; no other dimension may vary.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

// A record field is shorter than 4 GiB (record.h).
constexpr uint64_t kMaxFieldBytes = (uint64_t{1} << 32) - 1;

// "float32 [-1, 4]", for messages.
std::string TypeText(const FieldSpec& spec) {
  return absl::StrCat(std::string(tensor::DTypeName(spec.dtype)), " [",
                      absl::StrJoin(spec.shape, ", "), "]");
}

bool Ragged(const FieldSpec& spec) {
  return !spec.shape.empty() && spec.shape[0] == -1;
}

class NdarrayKind final : public FieldKind {
 public:
  std::string_view name() const override { return "ndarray"; }
  Passthrough passthrough(const FieldSpec& spec) const override {
    return Ragged(spec) ? Passthrough::kRaggedRows : Passthrough::kDense;
  }
  bool declares_dtype() const override { return true; }

  absl::Status CheckSpec(FieldSpec* spec) const override {
    uint64_t bytes = tensor::DTypeSize(spec->dtype);
    for (size_t i = 0; i < spec->shape.size(); ++i) {
      const int64_t d = spec->shape[i];
      if (d == -1 && i == 0) continue;
      if (d == -1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape: dimension ", i, " is -1; only the first may vary"));
      }
      if (d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape: dimension ", i, " is ", d,
                         "; dimensions are positive, or -1 for the first"));
      }
      if (static_cast<uint64_t>(d) > kMaxFieldBytes / bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape: ", Ragged(*spec) ? "a row of " : "", TypeText(*spec),
            " is over the 4 GiB a record field may hold"));
      }
      bytes *= static_cast<uint64_t>(d);
    }
    return absl::OkStatus();
  }

  absl::Status CheckValue(const FieldSpec& spec,
                          std::string_view value) const override {
    const uint64_t row = RowBytes(spec);
    if (!Ragged(spec)) {
      const uint64_t need =
          spec.shape.empty() ? row : row * static_cast<uint64_t>(spec.shape[0]);
      if (value.size() == need) return absl::OkStatus();
      return absl::DataLossError(absl::StrCat("field '", spec.name, "' has ",
                                              value.size(), " bytes, ",
                                              TypeText(spec), " needs ", need));
    }
    if (value.size() % row != 0) {
      return absl::DataLossError(
          absl::StrCat("field '", spec.name, "': ", value.size(),
                       " bytes is not whole rows of ", row, " bytes (",
                       TypeText(spec), ")"));
    }
    return CheckMaxLength(spec, value.size() / row, "rows");
  }

  absl::Status CheckContent(const FieldSpec& spec,
                            std::string_view value) const override {
    if (absl::Status s = CheckValue(spec, value); !s.ok()) return s;
    if (spec.dtype != tensor::DType::kBool) return absl::OkStatus();
    for (size_t i = 0; i < value.size(); ++i) {
      const auto b = static_cast<unsigned char>(value[i]);
      if (b > 1) {
        return absl::DataLossError(absl::StrCat("field '", spec.name,
                                                "': byte ", i, " is ", b,
                                                "; a bool is 0 or 1"));
      }
    }
    return absl::OkStatus();
  }
};

std::unique_ptr<FieldKind> MakeNdarrayKind() {
  return std::make_unique<NdarrayKind>();
}

}  // namespace

STOKER_REGISTER_FIELD_KIND(MakeNdarrayKind);

}  // namespace stoker::dataset
