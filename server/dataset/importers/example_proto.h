// A reader of serialized tf.train.Example messages, written against the
// protobuf wire format rather than generated from example.proto: the
// schema is small and fixed (tensorflow/core/example/{example,feature}.proto),
//
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }
//   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
//                      Int64List int64_list = 3; } }
//   *List    { repeated bytes|float|int64 value = 1; }  // packed or not
//
// and a hand-written reader keeps the parser one fuzzable file with no
// generated code or protobuf reflection in the dataset layer. Unknown
// fields are skipped as the wire format allows; groups are refused.
// Thread-safe: a pure function.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_EXAMPLE_PROTO_H_
#define STOKER_SERVER_DATASET_IMPORTERS_EXAMPLE_PROTO_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::dataset {

struct ExampleFeature {
  enum class Kind { kNone, kBytes, kFloat, kInt64 };
  Kind kind = Kind::kNone;
  std::vector<std::string_view> bytes;  // Borrow the serialized message.
  std::vector<float> floats;
  std::vector<int64_t> int64s;
};

using ExampleFeatures = std::map<std::string, ExampleFeature, std::less<>>;

// DataLoss saying where the message is malformed ("Example: truncated
// varint at byte 17"). A key given twice keeps its last value, as
// protobuf's map parsing does.
absl::StatusOr<ExampleFeatures> ParseExample(std::string_view message);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_EXAMPLE_PROTO_H_
