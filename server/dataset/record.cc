#include "server/dataset/record.h"

#include <xxhash.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

constexpr size_t kCountSize = 4;
constexpr size_t kLengthSize = 4;
constexpr size_t kChecksumSize = 8;

// Appends the low `n` bytes of `v`, least significant first.
void PutLittleEndian(uint64_t v, size_t n, std::string* out) {
  for (size_t i = 0; i < n; ++i)
    out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetLittleEndian(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}

uint64_t Checksum(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

// The field count, then `check` (a FieldKind method) on every field.
absl::Status CheckFields(const RecordView& record,
                         absl::Span<const FieldSpec> schema,
                         absl::Status (FieldKind::*check)(const FieldSpec&,
                                                          std::string_view)
                             const) {
  if (record.fields.size() != schema.size()) {
    return absl::DataLossError(absl::StrCat("record has ", record.fields.size(),
                                            " fields, the schema has ",
                                            schema.size()));
  }
  for (size_t i = 0; i < schema.size(); ++i) {
    const FieldSpec& spec = schema[i];
    if (absl::Status s = (spec.kind->*check)(spec, record.fields[i]); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeRecord(absl::Span<const std::string_view> fields) {
  size_t size = kCountSize + kChecksumSize;
  for (std::string_view f : fields) size += kLengthSize + f.size();
  std::string out;
  out.reserve(size);
  PutLittleEndian(fields.size(), kCountSize, &out);
  for (std::string_view f : fields) {
    PutLittleEndian(f.size(), kLengthSize, &out);
    out.append(f);
  }
  PutLittleEndian(Checksum(out), kChecksumSize, &out);
  return out;
}

absl::StatusOr<RecordView> DecodeRecord(std::string_view value) {
  if (value.size() < kCountSize + kChecksumSize) {
    return absl::DataLossError(
        absl::StrCat("truncated record (", value.size(), " bytes)"));
  }
  const std::string_view body = value.substr(0, value.size() - kChecksumSize);
  if (Checksum(body) !=
      GetLittleEndian(value.data() + body.size(), kChecksumSize)) {
    return absl::DataLossError("checksum mismatch");
  }
  // The checksum matched, so a framing error below means the writer was
  // wrong, not the disk; it is still reported as DataLoss.
  const uint64_t count = GetLittleEndian(body.data(), kCountSize);
  size_t pos = kCountSize;
  RecordView view;
  for (uint64_t i = 0; i < count; ++i) {
    if (body.size() - pos < kLengthSize) {
      return absl::DataLossError(
          absl::StrCat("bad framing: field ", i, " of ", count, " is missing"));
    }
    const uint64_t length = GetLittleEndian(body.data() + pos, kLengthSize);
    pos += kLengthSize;
    if (body.size() - pos < length) {
      return absl::DataLossError(
          absl::StrCat("bad framing: field ", i, " has length ", length,
                       " but only ", body.size() - pos, " bytes remain"));
    }
    view.fields.push_back(body.substr(pos, length));
    pos += length;
  }
  if (pos != body.size()) {
    return absl::DataLossError(absl::StrCat("bad framing: ", body.size() - pos,
                                            " bytes after the last field"));
  }
  return view;
}

absl::Status CheckRecordSchema(const RecordView& record,
                               absl::Span<const FieldSpec> schema) {
  return CheckFields(record, schema, &FieldKind::CheckValue);
}

absl::Status CheckRecordContent(const RecordView& record,
                                absl::Span<const FieldSpec> schema) {
  return CheckFields(record, schema, &FieldKind::CheckContent);
}

std::string EncodeKey(uint64_t id) {
  std::string key(8, '\0');
  for (int i = 0; i < 8; ++i) key[i] = static_cast<char>(id >> (8 * (7 - i)));
  return key;
}

absl::StatusOr<uint64_t> DecodeKey(std::string_view key) {
  if (key.size() != 8) {
    return absl::DataLossError(
        absl::StrCat("key has ", key.size(), " bytes, expected 8"));
  }
  uint64_t id = 0;
  for (char c : key) id = (id << 8) | static_cast<unsigned char>(c);
  return id;
}

std::string EncodeInt64(int64_t v) {
  std::string out;
  PutLittleEndian(static_cast<uint64_t>(v), 8, &out);
  return out;
}

int64_t DecodeInt64(std::string_view field) {
  if (field.size() != 8) {  // A caller's bug: abort, like a CHECK.
    std::fprintf(stderr, "stoker: DecodeInt64 of a %zu-byte field\n",
                 field.size());
    std::abort();
  }
  return static_cast<int64_t>(GetLittleEndian(field.data(), 8));
}

}  // namespace stoker::dataset
