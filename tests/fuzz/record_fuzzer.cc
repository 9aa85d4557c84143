// Fuzzes the record codec (server/dataset/record.h): the bytes of an LMDB
// value as a shard on disk may hold them, and an LMDB key.
//
// A random value almost never carries a matching XXH3 checksum, so the
// framing behind the checksum would stay unexplored. The first byte of the
// input therefore chooses a mode: odd, the rest of the input is the body of
// a value and gets its correct checksum appended; even, the rest is taken
// as it is.
//
// What must hold: DecodeRecord never reads out of bounds (ASan) and either
// returns DataLoss or fields that re-encode to exactly the value it read.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

#include "absl/status/status.h"
#include "server/dataset/record.h"

namespace {

using stoker::dataset::FieldKind;
using stoker::dataset::FieldSpec;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_record: %s\n", what);
    abort();
  }
}

void FuzzValue(std::string_view value) {
  absl::StatusOr<stoker::dataset::RecordView> record =
      stoker::dataset::DecodeRecord(value);
  if (!record.ok()) {
    Check(absl::IsDataLoss(record.status()), "a bad record is not DataLoss");
    return;
  }
  std::vector<std::string_view> fields(record->fields.begin(),
                                       record->fields.end());
  Check(stoker::dataset::EncodeRecord(fields) == value,
        "a decoded record does not re-encode to its bytes");
  const FieldSpec schema[] = {{"image", FieldKind::kBytes, "image/jpeg"},
                              {"label", FieldKind::kInt64, ""}};
  absl::Status s = stoker::dataset::CheckRecordSchema(*record, schema);
  if (s.ok()) {
    const int64_t label = stoker::dataset::DecodeInt64(fields[1]);
    Check(stoker::dataset::EncodeInt64(label) == fields[1],
          "an int64 field does not round-trip");
  } else {
    Check(absl::IsDataLoss(s), "a schema mismatch is not DataLoss");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  if (data[0] & 1) {
    std::string value(rest);
    const uint64_t sum = XXH3_64bits(value.data(), value.size());
    for (int i = 0; i < 8; ++i) value.push_back(static_cast<char>(sum >> (8 * i)));
    FuzzValue(value);
  } else {
    FuzzValue(rest);
  }
  absl::StatusOr<uint64_t> id = stoker::dataset::DecodeKey(rest);
  if (id.ok()) {
    Check(stoker::dataset::EncodeKey(*id) == rest, "a key does not round-trip");
  }
  return 0;
}
