#include "server/dataset/importers/msgpack_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

constexpr int kMaxDepth = 32;

class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}

  size_t at() const { return at_; }

  absl::Status Bad(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("msgpack: ", what, " at byte ", at_));
  }

  absl::Status Value(int depth, MsgValue* v) {
    if (depth > kMaxDepth) return Bad("nested too deeply");
    uint64_t b = 0;
    if (absl::Status s = Uint(1, &b); !s.ok()) return s;
    using T = MsgValue::Type;
    if (b <= 0x7f) return Int(static_cast<int64_t>(b), v);
    if (b >= 0xe0) return Int(static_cast<int64_t>(b) - 256, v);
    if ((b & 0xf0) == 0x80) return Items(T::kMap, 2 * (b & 0x0f), depth, v);
    if ((b & 0xf0) == 0x90) return Items(T::kArray, b & 0x0f, depth, v);
    if ((b & 0xe0) == 0xa0) return Bytes(T::kStr, b & 0x1f, v);
    uint64_t n = 0;
    switch (b) {
      case 0xc0:
        v->type = T::kNil;
        return absl::OkStatus();
      case 0xc2:
      case 0xc3:
        v->type = T::kBool;
        v->integer = b == 0xc3;
        return absl::OkStatus();
      case 0xc4:
      case 0xc5:
      case 0xc6:
        if (absl::Status s = Uint(1 << (b - 0xc4), &n); !s.ok()) return s;
        return Bytes(T::kBin, n, v);
      case 0xd9:
      case 0xda:
      case 0xdb:
        if (absl::Status s = Uint(1 << (b - 0xd9), &n); !s.ok()) return s;
        return Bytes(T::kStr, n, v);
      case 0xca:
      case 0xcb: {
        const int size = b == 0xca ? 4 : 8;
        if (absl::Status s = Uint(size, &n); !s.ok()) return s;
        v->type = T::kFloat;
        if (size == 4) {
          const auto bits = static_cast<uint32_t>(n);
          float f;
          std::memcpy(&f, &bits, 4);
          v->number = f;
        } else {
          std::memcpy(&v->number, &n, 8);
        }
        return absl::OkStatus();
      }
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xcf:
        if (absl::Status s = Uint(1 << (b - 0xcc), &n); !s.ok()) return s;
        if (n > static_cast<uint64_t>(INT64_MAX)) v->unsigned_overflow = true;
        return Int(static_cast<int64_t>(n), v);
      case 0xd0:
      case 0xd1:
      case 0xd2:
      case 0xd3: {
        const int size = 1 << (b - 0xd0);
        if (absl::Status s = Uint(size, &n); !s.ok()) return s;
        // Sign-extend from `size` bytes.
        const int shift = 64 - 8 * size;
        return Int(static_cast<int64_t>(n << shift) >> shift, v);
      }
      case 0xdc:
      case 0xdd:
        if (absl::Status s = Uint(b == 0xdc ? 2 : 4, &n); !s.ok()) return s;
        return Items(T::kArray, n, depth, v);
      case 0xde:
      case 0xdf:
        if (absl::Status s = Uint(b == 0xde ? 2 : 4, &n); !s.ok()) return s;
        return Items(T::kMap, 2 * n, depth, v);
      default:
        --at_;
        return Bad(absl::StrCat("unsupported type byte 0x",
                                absl::Hex(b, absl::kZeroPad2)));
    }
  }

 private:
  // A big-endian unsigned integer of `size` bytes.
  absl::Status Uint(int size, uint64_t* out) {
    if (d_.size() - at_ < static_cast<size_t>(size)) return Bad("truncated");
    *out = 0;
    for (int i = 0; i < size; ++i) {
      *out = *out << 8 | static_cast<unsigned char>(d_[at_++]);
    }
    return absl::OkStatus();
  }

  absl::Status Int(int64_t i, MsgValue* v) {
    v->type = MsgValue::Type::kInt;
    v->integer = i;
    return absl::OkStatus();
  }

  absl::Status Bytes(MsgValue::Type type, uint64_t n, MsgValue* v) {
    if (n > d_.size() - at_) return Bad("truncated str or bin");
    v->type = type;
    v->bytes = d_.substr(at_, n);
    at_ += n;
    return absl::OkStatus();
  }

  absl::Status Items(MsgValue::Type type, uint64_t n, int depth, MsgValue* v) {
    // Every item takes at least a byte: a count above what is left is a
    // lie, refused before anything is allocated for it.
    if (n > d_.size() - at_) return Bad("truncated array or map");
    v->type = type;
    v->items.resize(n);
    for (MsgValue& item : v->items) {
      if (absl::Status s = Value(depth + 1, &item); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  std::string_view d_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<MsgValue> ParseMsgpack(std::string_view data) {
  Reader r(data);
  MsgValue v;
  if (absl::Status s = r.Value(0, &v); !s.ok()) return s;
  if (r.at() != data.size()) return r.Bad("trailing bytes");
  return v;
}

}  // namespace stoker::dataset
