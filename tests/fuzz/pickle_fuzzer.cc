// Fuzzes the pickle reader (server/dataset/importers/pickle_reader.h), the
// one that must never run anything: it has no way to, so what is checked is
// that it stays in bounds (ASan), bounded in memory (-rss_limit_mb) and
// refuses only with DataLoss.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/dataset/importers/pickle_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<stoker::dataset::PyValue> v = stoker::dataset::ParsePickle(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!v.ok() && v.status().code() != absl::StatusCode::kDataLoss) {
    std::abort();
  }
  return 0;
}
