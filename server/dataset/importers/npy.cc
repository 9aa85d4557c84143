#include "server/dataset/importers/npy.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::dataset {
namespace {

absl::Status Bad(absl::string_view what) {
  return absl::DataLossError(absl::StrCat(".npy: ", what));
}

// The header: a Python dict literal of exactly the keys 'descr' (a
// string; a list is a structured dtype, refused), 'fortran_order' (True or
// False) and 'shape' (a tuple of ints), each once, as numpy.lib.format
// writes and reads it. A repeated key is refused: which one a reader took
// would decide whether the data is read transposed or byte-swapped.
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : t_(text) {}

  absl::StatusOr<Header> Parse() {
    Header h;
    bool seen[3] = {false, false, false};
    if (!Eat('{')) return Bad("the header is not a dict");
    while (!Eat('}')) {
      std::string key;
      Space();
      const size_t key_at = at_;
      if (absl::Status s = String(&key); !s.ok()) return s;
      if (!Eat(':')) return Bad(absl::StrCat("no ':' after '", key, "'"));
      int k = -1;
      absl::Status s;
      if (key == "descr") {
        k = 0;
        if (Peek() == '[') {
          return Bad("'descr' is a list (structured dtypes are not "
                     "supported)");
        }
        s = String(&h.descr);
      } else if (key == "fortran_order") {
        k = 1;
        s = Bool(&h.fortran_order);
      } else if (key == "shape") {
        k = 2;
        s = Shape(&h.shape);
      } else {
        return Bad(absl::StrCat("unknown header key '", key, "'"));
      }
      if (!s.ok()) return s;
      if (seen[k]) {
        return absl::DataLossError(
            absl::StrCat(".npy: header key '", key,
                         "' given twice (again at header byte ", key_at, ")"));
      }
      seen[k] = true;
      if (!Eat(',') && Peek() != '}') return Bad("no ',' between entries");
    }
    Space();
    if (at_ != t_.size()) return Bad("bytes after the header dict");
    constexpr const char* kKeys[] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; ++k) {
      if (!seen[k]) {
        return absl::DataLossError(
            absl::StrCat(".npy: no '", kKeys[k], "' in the header"));
      }
    }
    return h;
  }

 private:
  void Space() {
    while (at_ < t_.size() && absl::ascii_isspace(
                                  static_cast<unsigned char>(t_[at_]))) {
      ++at_;
    }
  }
  char Peek() {
    Space();
    return at_ < t_.size() ? t_[at_] : '\0';
  }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++at_;
    return true;
  }
  absl::Status Bad(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(".npy: ", what, " (header byte ", at_, ")"));
  }

  // A quoted string without escapes.
  absl::Status String(std::string* out) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') {
      return Bad("a key or value is not a string");
    }
    const size_t end = t_.find(quote, at_ + 1);
    if (end == std::string_view::npos) return Bad("an unterminated string");
    out->assign(t_.substr(at_ + 1, end - at_ - 1));
    if (out->find('\\') != std::string::npos) {
      return Bad("a string with an escape");
    }
    at_ = end + 1;
    return absl::OkStatus();
  }

  absl::Status Bool(bool* out) {
    Space();
    for (const auto& [word, value] :
         {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (t_.substr(at_, word.size()) == word) {
        at_ += word.size();
        *out = value;
        return absl::OkStatus();
      }
    }
    return Bad("'fortran_order' is neither True nor False");
  }

  absl::Status Shape(std::vector<int64_t>* out) {
    if (!Eat('(')) return Bad("'shape' is not a tuple");
    while (!Eat(')')) {
      Space();
      const size_t from = at_;
      while (at_ < t_.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(t_[at_]))) {
        ++at_;
      }
      int64_t v = 0;
      const std::string_view digits = t_.substr(from, at_ - from);
      if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()),
                            &v) ||
          v > (int64_t{1} << 40)) {
        return Bad(absl::StrCat("bad shape dimension '",
                                std::string(t_.substr(from, at_ - from + 1)),
                                "'"));
      }
      if (at_ < t_.size() && t_[at_] == 'L') ++at_;  // Python 2's long.
      out->push_back(v);
      if (!Eat(',') && Peek() != ')') return Bad("bad 'shape' tuple");
    }
    return absl::OkStatus();
  }

  std::string_view t_;
  size_t at_ = 0;
};

absl::StatusOr<tensor::DType> DTypeOf(std::string_view descr) {
  if (descr.size() < 2) return Bad(absl::StrCat("bad dtype '", std::string(descr), "'"));
  const char order = descr[0];
  const std::string_view code = descr.substr(1);
  struct Known {
    std::string_view code;
    tensor::DType dtype;
  };
  static constexpr Known kKnown[] = {
      {"b1", tensor::DType::kBool},    {"u1", tensor::DType::kUint8},
      {"i1", tensor::DType::kInt8},    {"u2", tensor::DType::kUint16},
      {"i2", tensor::DType::kInt16},   {"i4", tensor::DType::kInt32},
      {"i8", tensor::DType::kInt64},   {"f2", tensor::DType::kFloat16},
      {"f4", tensor::DType::kFloat32}, {"f8", tensor::DType::kFloat64},
  };
  for (const Known& k : kKnown) {
    if (k.code != code) continue;
    const bool one_byte = tensor::DTypeSize(k.dtype) == 1;
    if (order == '<' || (order == '|' && one_byte) ||
        (order == '>' && one_byte)) {
      return k.dtype;
    }
    return Bad(absl::StrCat("dtype '", std::string(descr),
                            "' is not little-endian; convert with "
                            "arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  if (code.find('O') != std::string_view::npos) {
    return Bad(absl::StrCat("dtype '", std::string(descr),
                            "' is not supported (object arrays hold Python "
                            "objects)"));
  }
  return Bad(absl::StrCat("dtype '", std::string(descr), "' is not supported"));
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(std::string_view file) {
  if (file.size() < 10 || file.substr(0, 6) != "\x93NUMPY") {
    return Bad("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(file[6]);
  uint64_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(file[8]) |
                 static_cast<unsigned char>(file[9]) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return Bad("truncated header");
    for (int i = 3; i >= 0; --i) {
      header_len = header_len << 8 | static_cast<unsigned char>(file[8 + i]);
    }
    header_at = 12;
  } else {
    return Bad(absl::StrCat("format version ", major, " is not supported"));
  }
  if (header_len > file.size() - header_at) return Bad("truncated header");
  const std::string_view header = file.substr(header_at, header_len);

  absl::StatusOr<Header> h = HeaderParser(header).Parse();
  if (!h.ok()) return h.status();
  NpyArray out;
  absl::StatusOr<tensor::DType> dtype = DTypeOf(h->descr);
  if (!dtype.ok()) return dtype.status();
  out.dtype = *dtype;
  if (h->fortran_order) {
    return Bad("fortran_order arrays are not supported; save "
               "np.ascontiguousarray(arr)");
  }
  uint64_t count = 1;
  for (const int64_t v : h->shape) {
    out.shape.push_back(v);
    if (v != 0 && count > (uint64_t{1} << 40) / static_cast<uint64_t>(v)) {
      return Bad("shape too large");
    }
    count *= static_cast<uint64_t>(v);
  }
  const std::string dims = absl::StrJoin(out.shape, ", ");
  out.data = file.substr(header_at + header_len);
  const uint64_t need = count * tensor::DTypeSize(out.dtype);
  if (out.data.size() != need) {
    return Bad(absl::StrCat("data is ", out.data.size(), " bytes, shape (",
                            std::string(dims), ") of ",
                            std::string(tensor::DTypeName(out.dtype)),
                            " needs ", need));
  }
  return out;
}

}  // namespace stoker::dataset
