// Ragged fields of a batch: a values tensor and its offsets, paired by the
// offsets tensor's offsets_for.
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "stoker/client.h"

namespace stoker {

absl::StatusOr<RaggedView> Batch::FindRagged(const std::string& name) const {
  const TensorView* values = Find(name);
  const TensorView* offsets = nullptr;
  for (const TensorView& t : tensors_) {
    if (t.offsets_for == name) offsets = &t;
  }
  if (values == nullptr || offsets == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("the batch has no ragged field '", name, "'",
                     values != nullptr ? " (it is a dense tensor)" : ""));
  }
  if (offsets->dtype != DType::kInt64 || offsets->shape.size() != 1 ||
      offsets->shape[0] < 1 ||
      offsets->size != static_cast<size_t>(offsets->shape[0]) * 8) {
    return absl::DataLossError(absl::StrCat("the offsets of ragged field '",
                                            name, "' are not int64 [n + 1]"));
  }
  RaggedView view{*values, *offsets, values->utf8};
  const int64_t rows = values->shape.empty() ? -1 : values->shape[0];
  if (rows < 0 ||
      values->size != static_cast<size_t>(rows) * view.row_bytes()) {
    return absl::DataLossError(
        absl::StrCat("the values of ragged field '", name, "' are ",
                     values->size, " bytes, not whole rows of its shape"));
  }
  // Every offset must lie within the values, in order, or a reader of
  // sample k would run past the batch.
  int64_t previous = 0;
  for (size_t k = 0; k <= view.size(); ++k) {
    int64_t o = 0;
    std::memcpy(&o, offsets->data + 8 * k, 8);
    if (o < previous || o > rows || (k == 0 && o != 0)) {
      return absl::DataLossError(
          absl::StrCat("offset ", k, " of ragged field '", name, "' is ", o,
                       ", outside [", previous, ", ", rows, "]"));
    }
    previous = o;
  }
  return view;
}

size_t RaggedView::row_bytes() const {
  size_t row = DTypeSize(values.dtype);
  for (size_t d = 1; d < values.shape.size(); ++d) {
    row *= static_cast<size_t>(values.shape[d]);
  }
  return row;
}

int64_t RaggedView::Offset(size_t k) const {
  int64_t o = 0;
  std::memcpy(&o, offsets.data + 8 * k, 8);
  return o;
}

std::string_view RaggedView::bytes(size_t k) const {
  const size_t row = row_bytes();
  return std::string_view(
      reinterpret_cast<const char*>(values.data) + begin(k) * row,
      (end(k) - begin(k)) * row);
}

}  // namespace stoker
