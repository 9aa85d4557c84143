#include "server/pipeline/op.h"

#include "absl/strings/str_cat.h"

namespace stoker::pipeline {

absl::StatusOr<std::vector<int>> ParseSizeArg(absl::string_view op,
                                              absl::string_view arg,
                                              const OpArgs& args) {
  const auto* values = FindArg<std::vector<double>>(args, std::string(arg));
  if (values == nullptr || values->empty() || values->size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op '", op, "': argument '", arg, "' must be an int or [h, w]"));
  }
  std::vector<int> sizes;
  for (double v : *values) {
    if (!(v >= 1 && v <= kMaxImageSide) || v != static_cast<int>(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "': argument '", arg, "' must hold whole ",
                       "numbers in [1, ", kMaxImageSide, "], not ", v));
    }
    sizes.push_back(static_cast<int>(v));
  }
  return sizes;
}

}  // namespace stoker::pipeline
