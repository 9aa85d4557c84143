// Fuzzes the .npy header reader (server/dataset/importers/npy.h): in
// bounds (ASan), DataLoss on refusal, and an accepted array's data is
// exactly prod(shape) elements of its dtype.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/dataset/importers/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<stoker::dataset::NpyArray> a = stoker::dataset::ParseNpy(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!a.ok()) {
    if (a.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  uint64_t count = 1;
  for (int64_t d : a->shape) {
    if (d < 0) std::abort();
    count *= static_cast<uint64_t>(d);
  }
  if (a->data.size() != count * stoker::tensor::DTypeSize(a->dtype)) {
    std::abort();
  }
  return 0;
}
