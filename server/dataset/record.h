// The on-disk record codec of a packed dataset: how one sample is laid out in
// an LMDB value, and how sample ids are laid out as keys.
//
// A value is the sample's fields in schema order, framed, followed by a
// checksum over everything before it (all integers little-endian):
//
//   u32 field_count | { u32 length | length bytes } * field_count | u64 xxh3
//
// where xxh3 is XXH3-64 (seed 0) of the preceding bytes. A key is the 8-byte
// big-endian sample id, so that LMDB's byte order is id order.
//
// Thread-safe: every function is pure.
#ifndef STOKER_SERVER_DATASET_RECORD_H_
#define STOKER_SERVER_DATASET_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {

// A decoded record. The views borrow the value buffer handed to
// DecodeRecord and are valid only as long as it is.
struct RecordView {
  absl::InlinedVector<std::string_view, 4> fields;
};

// Frames `fields` and appends the checksum.
// REQUIRES: every field is shorter than 4 GiB.
std::string EncodeRecord(absl::Span<const std::string_view> fields);

// Verifies the checksum and the framing of `value`. Returns DataLoss saying
// what is wrong ("checksum mismatch", "truncated", ...) without naming the
// record: the caller knows the shard and key and adds them.
absl::StatusOr<RecordView> DecodeRecord(std::string_view value);

// DataLoss unless `record` has one field per entry of `schema` and each
// value passes its kind's CheckValue (field_kind.h), e.g. "field 'label' has
// 5 bytes, int64 needs 8". What every read checks.
absl::Status CheckRecordSchema(const RecordView& record,
                               absl::Span<const FieldSpec> schema);

// CheckRecordSchema with each kind's CheckContent instead: also what pack
// checks once (a str is UTF-8, a bool array holds 0 and 1). What verify
// checks.
absl::Status CheckRecordContent(const RecordView& record,
                                absl::Span<const FieldSpec> schema);

// 8-byte big-endian sample id.
std::string EncodeKey(uint64_t id);
// DataLoss unless `key` is exactly 8 bytes.
absl::StatusOr<uint64_t> DecodeKey(std::string_view key);

// An int64 field: 8 bytes, little-endian two's complement.
std::string EncodeInt64(int64_t v);
// REQUIRES: field.size() == 8, else the process aborts (Dataset::Read checks
// this for int64 fields).
int64_t DecodeInt64(std::string_view field);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_RECORD_H_
