#include "server/dataset/importers/pickle_reader.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/file_util.h"

namespace stoker::dataset {
namespace {

// Bounds on what a hostile pickle can make the reader hold.
constexpr size_t kMaxStack = 1 << 16;
constexpr size_t kMaxMemo = 1 << 16;
constexpr uint64_t kMaxCopied = uint64_t{1} << 28;
// Tuples and lists nest at most this deep. A record is a pair of plain
// values; the bound keeps the recursion of a PyValue's destructor and of
// Cost() shallow, where 400,000 nested TUPLE1s would overflow the stack.
constexpr int kMaxDepth = 100;

// Opcodes the reader refuses, named for the message.
struct Refused {
  char op;
  const char* name;
  const char* why;
};
constexpr Refused kRefused[] = {
    {'c', "GLOBAL", "it imports a name"},
    {'\x93', "STACK_GLOBAL", "it imports a name"},
    {'R', "REDUCE", "it calls an object"},
    {'b', "BUILD", "it sets an object's state"},
    {'i', "INST", "it constructs an object"},
    {'o', "OBJ", "it constructs an object"},
    {'\x81', "NEWOBJ", "it constructs an object"},
    {'\x92', "NEWOBJ_EX", "it constructs an object"},
    {'\x82', "EXT1", "it imports a registered name"},
    {'\x83', "EXT2", "it imports a registered name"},
    {'\x84', "EXT4", "it imports a registered name"},
    {'P', "PERSID", "it loads a persistent object"},
    {'Q', "BINPERSID", "it loads a persistent object"},
};

// A stack slot: a value, a MARK, or the _codecs.encode callable.
struct Slot {
  enum class Kind { kValue, kMark, kCodecsEncode } kind = Kind::kValue;
  PyValue value;
  int depth = 0;  // Of value: 0 for a scalar, 1 + its deepest item's.
};

// A memoized value and its depth.
struct Memoized {
  PyValue value;
  int depth = 0;
};

// latin-1 bytes of a UTF-8 string whose code points are all below 256.
bool Latin1(std::string_view utf8, std::string* out) {
  out->clear();
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size()) {
      const auto d = static_cast<unsigned char>(utf8[++i]);
      if ((d & 0xC0) != 0x80) return false;
      out->push_back(static_cast<char>(((c & 0x03) << 6) | (d & 0x3F)));
    } else {
      return false;
    }
  }
  return true;
}

class Machine {
 public:
  explicit Machine(std::string_view d) : d_(d) {}

  absl::StatusOr<PyValue> Run() {
    while (at_ < d_.size()) {
      op_at_ = at_;
      const char op = d_[at_++];
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || stack_[0].kind != Slot::Kind::kValue) {
          return Bad("STOP with a stack that is not one value");
        }
        if (at_ != d_.size()) return Bad("bytes after STOP");
        return std::move(stack_[0].value);
      }
      if (absl::Status s = Step(op); !s.ok()) return s;
      if (stack_.size() > kMaxStack) return Bad("stack too deep");
    }
    return Bad("no STOP");
  }

 private:
  absl::Status Bad(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("pickle: ", what, " at byte ", op_at_));
  }

  absl::Status Take(size_t n, std::string_view* out) {
    if (d_.size() - at_ < n) return Bad("truncated");
    *out = d_.substr(at_, n);
    at_ += n;
    return absl::OkStatus();
  }

  // A little-endian unsigned argument of `n` bytes.
  absl::Status Le(size_t n, uint64_t* v) {
    std::string_view b;
    if (absl::Status s = Take(n, &b); !s.ok()) return s;
    *v = 0;
    for (size_t i = n; i-- > 0;) {
      *v = *v << 8 | static_cast<unsigned char>(b[i]);
    }
    return absl::OkStatus();
  }

  void Push(PyValue v, int depth = 0) {
    stack_.push_back({Slot::Kind::kValue, std::move(v), depth});
  }

  // The depth of a tuple or list that holds a value of depth `item`.
  absl::StatusOr<int> Around(int item) const {
    if (item + 1 > kMaxDepth) {
      return Bad(absl::StrCat("tuples and lists nested more than ", kMaxDepth,
                              " deep"));
    }
    return item + 1;
  }

  absl::Status PushInt(int64_t i) {
    PyValue v;
    v.type = PyValue::Type::kInt;
    v.integer = i;
    Push(std::move(v));
    return absl::OkStatus();
  }

  absl::Status PushBytes(size_t len_bytes, PyValue::Type type) {
    uint64_t n = 0;
    if (absl::Status s = Le(len_bytes, &n); !s.ok()) return s;
    std::string_view b;
    if (absl::Status s = Take(n, &b); !s.ok()) return s;
    if (type == PyValue::Type::kStr && !IsUtf8(b)) return Bad("str not UTF-8");
    PyValue v;
    v.type = type;
    v.bytes = std::string(b);
    Push(std::move(v));
    return absl::OkStatus();
  }

  // Pops the top `n` values (none a MARK) into a tuple.
  absl::Status Tuple(size_t n) {
    if (stack_.size() < n) return Bad("tuple of more items than the stack");
    int deepest = 0;
    for (size_t i = stack_.size() - n; i < stack_.size(); ++i) {
      if (stack_[i].kind != Slot::Kind::kValue) return Bad("tuple of a mark");
      deepest = std::max(deepest, stack_[i].depth);
    }
    absl::StatusOr<int> depth = Around(deepest);
    if (!depth.ok()) return depth.status();
    PyValue t;
    t.type = PyValue::Type::kTuple;
    for (size_t i = stack_.size() - n; i < stack_.size(); ++i) {
      t.items.push_back(std::move(stack_[i].value));
    }
    stack_.resize(stack_.size() - n);
    Push(std::move(t), *depth);
    return absl::OkStatus();
  }

  // The number of values above the topmost MARK, or an error.
  absl::StatusOr<size_t> SinceMark() const {
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].kind == Slot::Kind::kMark) return stack_.size() - i - 1;
    }
    return Bad("no MARK");
  }

  absl::Status Memo(uint64_t index) {
    if (stack_.empty()) return Bad("memo of an empty stack");
    // Protocol 2 memoizes the _codecs.encode it pushed; that is never got
    // again in a record, so it is not kept.
    if (stack_.back().kind == Slot::Kind::kCodecsEncode) {
      return absl::OkStatus();
    }
    if (stack_.back().kind != Slot::Kind::kValue) return Bad("memo of a mark");
    if (memo_.size() >= kMaxMemo && memo_.count(index) == 0) {
      return Bad("memo too large");
    }
    copied_ += Cost(stack_.back().value);
    if (copied_ > kMaxCopied) return Bad("memo puts copy too much");
    memo_[index] = {stack_.back().value, stack_.back().depth};
    return absl::OkStatus();
  }

  // Items and bytes of `v`, for the copy budget.
  static uint64_t Cost(const PyValue& v) {
    uint64_t c = 1 + v.bytes.size();
    for (const PyValue& i : v.items) c += Cost(i);
    return c;
  }

  absl::Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Bad("memo get of an unset index");
    // A memo get copies: a list appended to itself doubles with each get,
    // so the copies together are bounded.
    copied_ += Cost(it->second.value);
    if (copied_ > kMaxCopied) return Bad("memo gets copy too much");
    Push(it->second.value, it->second.depth);
    return absl::OkStatus();
  }

  absl::Status Step(char op) {
    uint64_t n = 0;
    switch (op) {
      case '\x80':  // PROTO
        if (absl::Status s = Le(1, &n); !s.ok()) return s;
        if (n < 2 || n > 5) return Bad(absl::StrCat("protocol ", n));
        return absl::OkStatus();
      case '\x95':  // FRAME: a length hint only.
        return Le(8, &n);
      case '(':  // MARK
        stack_.push_back({Slot::Kind::kMark, {}});
        return absl::OkStatus();
      case '\x94':  // MEMOIZE
        return Memo(memo_.size());
      case 'q':  // BINPUT
        if (absl::Status s = Le(1, &n); !s.ok()) return s;
        return Memo(n);
      case 'r':  // LONG_BINPUT
        if (absl::Status s = Le(4, &n); !s.ok()) return s;
        return Memo(n);
      case 'h':  // BINGET
        if (absl::Status s = Le(1, &n); !s.ok()) return s;
        return Get(n);
      case 'j':  // LONG_BINGET
        if (absl::Status s = Le(4, &n); !s.ok()) return s;
        return Get(n);
      case 'C':  // SHORT_BINBYTES
        return PushBytes(1, PyValue::Type::kBytes);
      case 'B':  // BINBYTES
        return PushBytes(4, PyValue::Type::kBytes);
      case '\x8e':  // BINBYTES8
        return PushBytes(8, PyValue::Type::kBytes);
      case '\x8c':  // SHORT_BINUNICODE
        return PushBytes(1, PyValue::Type::kStr);
      case 'X':  // BINUNICODE
        return PushBytes(4, PyValue::Type::kStr);
      case 'K':  // BININT1
        if (absl::Status s = Le(1, &n); !s.ok()) return s;
        return PushInt(static_cast<int64_t>(n));
      case 'M':  // BININT2
        if (absl::Status s = Le(2, &n); !s.ok()) return s;
        return PushInt(static_cast<int64_t>(n));
      case 'J':  // BININT: signed 4 bytes.
        if (absl::Status s = Le(4, &n); !s.ok()) return s;
        return PushInt(static_cast<int32_t>(static_cast<uint32_t>(n)));
      case '\x8a': {  // LONG1: n-byte little-endian two's complement.
        if (absl::Status s = Le(1, &n); !s.ok()) return s;
        if (n > 8) return Bad("LONG1 of more than 8 bytes (beyond int64)");
        uint64_t v = 0;
        if (absl::Status s = Le(n, &v); !s.ok()) return s;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) {
          v |= ~uint64_t{0} << (8 * n);  // Sign-extend.
        }
        return PushInt(static_cast<int64_t>(v));
      }
      case 'N':  // NONE
        Push(PyValue());
        return absl::OkStatus();
      case '\x88':  // NEWTRUE
      case '\x89': {  // NEWFALSE
        PyValue v;
        v.type = PyValue::Type::kBool;
        v.integer = op == '\x88';
        Push(std::move(v));
        return absl::OkStatus();
      }
      case '\x85':  // TUPLE1
        return Tuple(1);
      case '\x86':  // TUPLE2
        return Tuple(2);
      case '\x87':  // TUPLE3
        return Tuple(3);
      case ')':  // EMPTY_TUPLE
        return Tuple(0);
      case 't': {  // TUPLE: the values since the MARK.
        absl::StatusOr<size_t> k = SinceMark();
        if (!k.ok()) return k.status();
        if (absl::Status s = Tuple(*k); !s.ok()) return s;
        Slot t = std::move(stack_.back());
        stack_.pop_back();
        stack_.pop_back();  // The MARK.
        stack_.push_back(std::move(t));
        return absl::OkStatus();
      }
      case ']': {  // EMPTY_LIST
        PyValue v;
        v.type = PyValue::Type::kList;
        Push(std::move(v));
        return absl::OkStatus();
      }
      case 'a':  // APPEND
      case 'e': {  // APPENDS
        size_t k = 1;
        if (op == 'e') {
          absl::StatusOr<size_t> since = SinceMark();
          if (!since.ok()) return since.status();
          k = *since;
        }
        const size_t below = k + (op == 'e' ? 2 : 1);
        if (stack_.size() < below) return Bad("append without a list");
        const size_t list_at = stack_.size() - below;
        if (stack_[list_at].kind != Slot::Kind::kValue ||
            stack_[list_at].value.type != PyValue::Type::kList) {
          return Bad("append to something that is not a list");
        }
        int deepest = 0;
        for (size_t i = stack_.size() - k; i < stack_.size(); ++i) {
          if (stack_[i].kind != Slot::Kind::kValue) {
            return Bad("append of something that is not a value");
          }
          deepest = std::max(deepest, stack_[i].depth);
        }
        absl::StatusOr<int> depth = Around(deepest);
        if (!depth.ok()) return depth.status();
        Slot& list = stack_[list_at];
        list.depth = std::max(list.depth, *depth);
        for (size_t i = stack_.size() - k; i < stack_.size(); ++i) {
          list.value.items.push_back(std::move(stack_[i].value));
        }
        stack_.resize(list_at + 1);
        return absl::OkStatus();
      }
      case 'c': {  // GLOBAL: only protocol 2's way to spell bytes.
        const size_t end = d_.find('\n', d_.find('\n', at_) + 1);
        if (end != std::string_view::npos &&
            d_.substr(at_, end - at_) == "_codecs\nencode") {
          at_ = end + 1;
          stack_.push_back({Slot::Kind::kCodecsEncode, {}});
          return absl::OkStatus();
        }
        break;
      }
      case 'R': {  // REDUCE: only _codecs.encode(str, 'latin1').
        if (stack_.size() < 2 ||
            stack_[stack_.size() - 2].kind != Slot::Kind::kCodecsEncode) {
          break;
        }
        const PyValue& args = stack_.back().value;
        std::string bytes;
        if (stack_.back().kind != Slot::Kind::kValue ||
            args.type != PyValue::Type::kTuple || args.items.size() != 2 ||
            args.items[0].type != PyValue::Type::kStr ||
            args.items[1].type != PyValue::Type::kStr ||
            args.items[1].bytes != "latin1" ||
            !Latin1(args.items[0].bytes, &bytes)) {
          return Bad("_codecs.encode with arguments other than (str, "
                     "'latin1')");
        }
        stack_.resize(stack_.size() - 2);
        PyValue v;
        v.type = PyValue::Type::kBytes;
        v.bytes = std::move(bytes);
        Push(std::move(v));
        return absl::OkStatus();
      }
      default:
        break;
    }
    for (const Refused& r : kRefused) {
      if (r.op == op) {
        return Bad(absl::StrCat(
            "opcode ", r.name, " is refused (", r.why,
            "; the reader takes only plain bytes, ints, tuples and lists, "
            "and runs nothing)"));
      }
    }
    return Bad(absl::StrCat("opcode 0x",
                            absl::Hex(static_cast<unsigned char>(op),
                                      absl::kZeroPad2),
                            " is not supported"));
  }

  std::string_view d_;
  size_t at_ = 0;
  size_t op_at_ = 0;
  std::vector<Slot> stack_;
  std::map<uint64_t, Memoized> memo_;
  uint64_t copied_ = 0;  // By memo gets and puts.
};

}  // namespace

absl::StatusOr<PyValue> ParsePickle(std::string_view data) {
  return Machine(data).Run();
}

}  // namespace stoker::dataset
