// Field kinds `bytes` and `str`: raw bytes, any length; a str is UTF-8
// (JSON is a str), checked when pack stores it and by verify, not on every
// read.

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/dataset/field_kind.h"
#include "server/dataset/file_util.h"

namespace stoker::dataset {
namespace {

class BytesKind final : public FieldKind {
 public:
  explicit BytesKind(bool utf8) : utf8_(utf8) {}

  std::string_view name() const override { return utf8_ ? "str" : "bytes"; }
  Passthrough passthrough(const FieldSpec&) const override {
    return Passthrough::kRaggedBytes;
  }

  absl::Status CheckSpec(FieldSpec* spec) const override {
    SetBytesType(spec);
    return absl::OkStatus();
  }

  absl::Status CheckValue(const FieldSpec& spec,
                          std::string_view value) const override {
    return CheckMaxLength(spec, value.size(), "bytes");
  }

  absl::Status CheckContent(const FieldSpec& spec,
                            std::string_view value) const override {
    if (absl::Status s = CheckValue(spec, value); !s.ok()) return s;
    if (!utf8_) return absl::OkStatus();
    const size_t good = Utf8PrefixLength(value);
    if (good == value.size()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat("field '", spec.name,
                                            "': not UTF-8 at byte ", good,
                                            " of ", value.size(),
                                            " (a str must be UTF-8; store "
                                            "other text as bytes)"));
  }

  // The text itself: a str is its UTF-8, a bytes value its raw bytes
  // (CheckContent checks a str's UTF-8 later, as for every importer).
  absl::StatusOr<std::string> FromText(const FieldSpec&,
                                       std::string_view text) const override {
    return std::string(text);
  }

 private:
  const bool utf8_;
};

std::unique_ptr<FieldKind> MakeBytesKind() {
  return std::make_unique<BytesKind>(/*utf8=*/false);
}

std::unique_ptr<FieldKind> MakeStrKind() {
  return std::make_unique<BytesKind>(/*utf8=*/true);
}

}  // namespace

STOKER_REGISTER_FIELD_KIND(MakeBytesKind);
STOKER_REGISTER_FIELD_KIND(MakeStrKind);

}  // namespace stoker::dataset
