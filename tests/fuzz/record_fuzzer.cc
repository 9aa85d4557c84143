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
// returns DataLoss or fields that re-encode to exactly the value it read;
// the field kinds' checks refuse only with DataLoss, and what pack checks
// (CheckRecordContent) passes only what a read (CheckRecordSchema) passes.
#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/dataset/record.h"

namespace {

using stoker::dataset::FieldSpec;
using stoker::dataset::MakeArraySpec;
using stoker::dataset::MakeFieldSpec;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_record: %s\n", what);
    abort();
  }
}

const std::vector<FieldSpec>& ImageLabel() {
  static const auto* const schema =
      new std::vector<FieldSpec>{MakeFieldSpec("image", "image").value(),
                                 MakeFieldSpec("label", "int64").value()};
  return *schema;
}

// One field of each kind, with a max_length where a kind has one.
const std::vector<FieldSpec>& EveryKind() {
  static const auto* const schema = [] {
    using stoker::tensor::DType;
    auto* out = new std::vector<FieldSpec>{
        MakeFieldSpec("image", "image").value(),
        MakeFieldSpec("label", "int64").value(),
        MakeFieldSpec("weight", "float32").value(),
        MakeFieldSpec("target", "float64").value(),
        MakeArraySpec("tokens", DType::kInt32, {-1}).value(),
        MakeArraySpec("mask", DType::kBool, {-1, 3}).value(),
        MakeArraySpec("embedding", DType::kFloat16, {2, 2}).value(),
        MakeFieldSpec("caption", "str").value(),
        MakeFieldSpec("blob", "bytes").value()};
    (*out)[0].max_length = 64;
    (*out)[4].max_length = 4;
    (*out)[7].max_length = 16;
    return out;
  }();
  return *schema;
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
  const std::vector<FieldSpec>& image_label = ImageLabel();
  absl::Status s = stoker::dataset::CheckRecordSchema(*record, image_label);
  if (s.ok()) {
    const int64_t label = stoker::dataset::DecodeInt64(fields[1]);
    Check(stoker::dataset::EncodeInt64(label) == fields[1],
          "an int64 field does not round-trip");
  } else {
    Check(absl::IsDataLoss(s), "a schema mismatch is not DataLoss");
  }
  // The same fields under a schema with every kind, as many as there are:
  // what pack checks implies what a read checks, and both refuse with
  // DataLoss.
  const std::vector<FieldSpec>& kinds = EveryKind();
  std::vector<FieldSpec> schema;
  for (size_t i = 0; i < fields.size(); ++i) {
    schema.push_back(kinds[i % kinds.size()]);
  }
  const absl::Status read = stoker::dataset::CheckRecordSchema(*record, schema);
  const absl::Status packed =
      stoker::dataset::CheckRecordContent(*record, schema);
  Check(read.ok() || absl::IsDataLoss(read), "a read check is not DataLoss");
  Check(packed.ok() || absl::IsDataLoss(packed),
        "a content check is not DataLoss");
  Check(read.ok() || !packed.ok(), "content passes what a read refuses");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  if (data[0] & 1) {
    std::string value(rest);
    const uint64_t sum = XXH3_64bits(value.data(), value.size());
    for (int i = 0; i < 8; ++i)
      value.push_back(static_cast<char>(sum >> (8 * i)));
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
