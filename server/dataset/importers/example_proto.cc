#include "server/dataset/importers/example_proto.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

// Reads protobuf wire format from a byte range; offsets in messages are
// relative to the whole Example.
class Wire {
 public:
  Wire(std::string_view data, size_t base) : data_(data), base_(base) {}

  bool done() const { return at_ >= data_.size(); }

  absl::Status Bad(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("Example: ", what, " at byte ", base_ + at_));
  }

  absl::Status Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= data_.size()) return Bad("truncated varint");
      const auto b = static_cast<unsigned char>(data_[at_++]);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return absl::OkStatus();
    }
    return Bad("varint longer than 10 bytes");
  }

  // A length-delimited field's bytes and where they start.
  absl::Status Bytes(std::string_view* out, size_t* base) {
    uint64_t len = 0;
    if (absl::Status s = Varint(&len); !s.ok()) return s;
    if (len > data_.size() - at_) return Bad("truncated length-delimited field");
    *base = base_ + at_;
    *out = data_.substr(at_, len);
    at_ += len;
    return absl::OkStatus();
  }

  absl::Status Fixed32(uint32_t* v) {
    if (data_.size() - at_ < 4) return Bad("truncated fixed32");
    std::memcpy(v, data_.data() + at_, 4);  // Little-endian host.
    at_ += 4;
    return absl::OkStatus();
  }

  // Skips a field of `wire_type` that the schema does not use.
  absl::Status Skip(uint64_t wire_type) {
    uint64_t v = 0;
    std::string_view b;
    size_t base = 0;
    switch (wire_type) {
      case 0:
        return Varint(&v);
      case 1:
        if (data_.size() - at_ < 8) return Bad("truncated fixed64");
        at_ += 8;
        return absl::OkStatus();
      case 2:
        return Bytes(&b, &base);
      case 5:
        if (data_.size() - at_ < 4) return Bad("truncated fixed32");
        at_ += 4;
        return absl::OkStatus();
      default:
        return Bad(absl::StrCat("unsupported wire type ", wire_type));
    }
  }

  // The next tag: field number and wire type.
  absl::Status Tag(uint64_t* field, uint64_t* wire_type) {
    uint64_t tag = 0;
    if (absl::Status s = Varint(&tag); !s.ok()) return s;
    *field = tag >> 3;
    *wire_type = tag & 7;
    if (*field == 0) return Bad("field number 0");
    return absl::OkStatus();
  }

 private:
  std::string_view data_;
  size_t base_;
  size_t at_ = 0;
};

// One *List message into `f`.
absl::Status ParseList(std::string_view data, size_t base,
                       ExampleFeature::Kind kind, ExampleFeature* f) {
  f->kind = kind;
  Wire w(data, base);
  while (!w.done()) {
    uint64_t field = 0, type = 0;
    if (absl::Status s = w.Tag(&field, &type); !s.ok()) return s;
    if (field != 1) {
      if (absl::Status s = w.Skip(type); !s.ok()) return s;
      continue;
    }
    if (kind == ExampleFeature::Kind::kBytes) {
      if (type != 2) return w.Bad("bytes_list value is not bytes");
      std::string_view b;
      size_t at = 0;
      if (absl::Status s = w.Bytes(&b, &at); !s.ok()) return s;
      f->bytes.push_back(b);
    } else if (kind == ExampleFeature::Kind::kFloat && type == 5) {
      uint32_t bits = 0;
      if (absl::Status s = w.Fixed32(&bits); !s.ok()) return s;
      float v;
      std::memcpy(&v, &bits, 4);
      f->floats.push_back(v);
    } else if (kind == ExampleFeature::Kind::kInt64 && type == 0) {
      uint64_t v = 0;
      if (absl::Status s = w.Varint(&v); !s.ok()) return s;
      f->int64s.push_back(static_cast<int64_t>(v));
    } else if (type == 2) {  // Packed.
      std::string_view packed;
      size_t at = 0;
      if (absl::Status s = w.Bytes(&packed, &at); !s.ok()) return s;
      Wire p(packed, at);
      while (!p.done()) {
        if (kind == ExampleFeature::Kind::kFloat) {
          uint32_t bits = 0;
          if (absl::Status s = p.Fixed32(&bits); !s.ok()) return s;
          float v;
          std::memcpy(&v, &bits, 4);
          f->floats.push_back(v);
        } else {
          uint64_t v = 0;
          if (absl::Status s = p.Varint(&v); !s.ok()) return s;
          f->int64s.push_back(static_cast<int64_t>(v));
        }
      }
    } else {
      return w.Bad(absl::StrCat("list value of wire type ", type));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseFeature(std::string_view data, size_t base,
                          ExampleFeature* f) {
  Wire w(data, base);
  *f = ExampleFeature();
  while (!w.done()) {
    uint64_t field = 0, type = 0;
    if (absl::Status s = w.Tag(&field, &type); !s.ok()) return s;
    if (field < 1 || field > 3 || type != 2) {
      if (absl::Status s = w.Skip(type); !s.ok()) return s;
      continue;
    }
    std::string_view list;
    size_t at = 0;
    if (absl::Status s = w.Bytes(&list, &at); !s.ok()) return s;
    *f = ExampleFeature();  // oneof: the last one wins.
    if (absl::Status s = ParseList(
            list, at, static_cast<ExampleFeature::Kind>(field), f);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExampleFeatures> ParseExample(std::string_view message) {
  ExampleFeatures out;
  Wire example(message, 0);
  while (!example.done()) {
    uint64_t field = 0, type = 0;
    if (absl::Status s = example.Tag(&field, &type); !s.ok()) return s;
    if (field != 1 || type != 2) {
      if (absl::Status s = example.Skip(type); !s.ok()) return s;
      continue;
    }
    std::string_view features;
    size_t features_at = 0;
    if (absl::Status s = example.Bytes(&features, &features_at); !s.ok()) {
      return s;
    }
    Wire fw(features, features_at);
    while (!fw.done()) {
      if (absl::Status s = fw.Tag(&field, &type); !s.ok()) return s;
      if (field != 1 || type != 2) {
        if (absl::Status s = fw.Skip(type); !s.ok()) return s;
        continue;
      }
      std::string_view entry;
      size_t entry_at = 0;
      if (absl::Status s = fw.Bytes(&entry, &entry_at); !s.ok()) return s;
      // A map entry: key = 1, value = 2.
      Wire ew(entry, entry_at);
      std::string key;
      ExampleFeature value;
      while (!ew.done()) {
        if (absl::Status s = ew.Tag(&field, &type); !s.ok()) return s;
        std::string_view b;
        size_t at = 0;
        if (field == 1 && type == 2) {
          if (absl::Status s = ew.Bytes(&b, &at); !s.ok()) return s;
          key = std::string(b);
        } else if (field == 2 && type == 2) {
          if (absl::Status s = ew.Bytes(&b, &at); !s.ok()) return s;
          if (absl::Status s = ParseFeature(b, at, &value); !s.ok()) return s;
        } else if (absl::Status s = ew.Skip(type); !s.ok()) {
          return s;
        }
      }
      out[key] = std::move(value);
    }
  }
  return out;
}

}  // namespace stoker::dataset
