// Fuzzes the msgpack reader (server/dataset/importers/msgpack_reader.h):
// in bounds (ASan), bounded in depth and memory, DataLoss on refusal, and
// every str/bin it returns lies inside the input.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/dataset/importers/msgpack_reader.h"

namespace {

void CheckInside(const stoker::dataset::MsgValue& v, std::string_view in) {
  if (!v.bytes.empty() && (v.bytes.data() < in.data() ||
                           v.bytes.data() + v.bytes.size() >
                               in.data() + in.size())) {
    std::abort();
  }
  for (const stoker::dataset::MsgValue& i : v.items) CheckInside(i, in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<stoker::dataset::MsgValue> v =
      stoker::dataset::ParseMsgpack(in);
  if (!v.ok()) {
    if (v.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  CheckInside(*v, in);
  return 0;
}
