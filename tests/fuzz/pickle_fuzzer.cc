// Fuzzes the pickle reader (server/dataset/importers/pickle_reader.h), the
// one that must never run anything: it has no way to, so what is checked is
// that it stays in bounds (ASan), bounded in memory (-rss_limit_mb),
// refuses only with DataLoss, and accepts nothing nested over 100 deep.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "server/dataset/importers/pickle_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<stoker::dataset::PyValue> v = stoker::dataset::ParsePickle(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!v.ok()) {
    if (v.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  // The depth of what was accepted, walked without recursion.
  std::vector<std::pair<const stoker::dataset::PyValue*, int>> todo = {
      {&*v, 0}};
  while (!todo.empty()) {
    auto [value, depth] = todo.back();
    todo.pop_back();
    if (!value->items.empty() && depth + 1 > 100) std::abort();
    for (const stoker::dataset::PyValue& item : value->items) {
      todo.push_back({&item, depth + 1});
    }
  }
  return 0;
}
