// Field kind `image`: encoded image bytes (JPEG, PNG, ...; the decoder is
// chosen by content, never by a name). Spatial: geometry ops apply to it.
// Pack and `verify --decode` decode it through the ImageCheck they are
// handed; a read checks only that it is there.

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

class ImageKind final : public FieldKind {
 public:
  std::string_view name() const override { return "image"; }
  Passthrough passthrough(const FieldSpec&) const override {
    return Passthrough::kRaggedBytes;
  }
  bool spatial() const override { return true; }

  absl::Status CheckSpec(FieldSpec* spec) const override {
    SetBytesType(spec);
    return absl::OkStatus();
  }

  absl::Status CheckValue(const FieldSpec& spec,
                          std::string_view value) const override {
    if (value.empty()) {
      return absl::DataLossError(
          absl::StrCat("field '", spec.name, "': empty, no image bytes"));
    }
    return CheckMaxLength(spec, value.size(), "bytes");
  }
};

std::unique_ptr<FieldKind> MakeImageKind() {
  return std::make_unique<ImageKind>();
}

}  // namespace

STOKER_REGISTER_FIELD_KIND(MakeImageKind);

}  // namespace stoker::dataset
