// A reader of the MessagePack subset Efficient-PyTorch's LMDBs use:
// nil, booleans, integers, floats, str, bin, arrays and maps (no ext
// types). Values borrow the input; nesting is bounded, so a hostile input
// cannot exhaust the stack. Thread-safe: pure functions.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_MSGPACK_READER_H_
#define STOKER_SERVER_DATASET_IMPORTERS_MSGPACK_READER_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::dataset {

struct MsgValue {
  enum class Type { kNil, kBool, kInt, kFloat, kStr, kBin, kArray, kMap };
  Type type = Type::kNil;
  int64_t integer = 0;  // kInt, kBool (0 or 1).
  bool unsigned_overflow = false;  // A uint64 above INT64_MAX.
  double number = 0;               // kFloat.
  std::string_view bytes;          // kStr, kBin.
  std::vector<MsgValue> items;     // kArray; kMap: key, value, key, ...
};

// Parses exactly one value filling `data`. DataLoss "msgpack: ... at byte N"
// for a truncated or unsupported value, or trailing bytes.
absl::StatusOr<MsgValue> ParseMsgpack(std::string_view data);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_MSGPACK_READER_H_
