// Field kind `ndarray`: a C-order array of a declared dtype and shape
// (token ids, boxes, embeddings). With shape[0] == -1 a value is any number
// of whole rows of prod(shape[1:]) elements; no other dimension may vary.

#include <climits>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/tensor/float16.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {
namespace {

// A record field is shorter than 4 GiB (record.h).
constexpr uint64_t kMaxFieldBytes = (uint64_t{1} << 32) - 1;

// "float32 [-1, 4]", for messages.
std::string TypeText(const FieldSpec& spec) {
  return absl::StrCat(std::string(tensor::DTypeName(spec.dtype)), " [",
                      absl::StrJoin(spec.shape, ", "), "]");
}

bool Ragged(const FieldSpec& spec) {
  return !spec.shape.empty() && spec.shape[0] == -1;
}

// Appends `number` as one element of `dtype`; false if it is not a number
// of that dtype (an integer out of range, a fraction for an integer type).
bool AppendElement(tensor::DType dtype, absl::string_view number,
                   std::string* out) {
  auto put = [out](const auto& v) {
    out->append(reinterpret_cast<const char*>(&v), sizeof(v));
  };
  auto integer = [&](auto zero, int64_t lo, int64_t hi) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(number, &v) || v < lo || v > hi) return false;
    put(static_cast<decltype(zero)>(v));
    return true;
  };
  using L = std::numeric_limits<int64_t>;
  switch (dtype) {
    case tensor::DType::kBool:
      return integer(uint8_t{0}, 0, 1);
    case tensor::DType::kUint8:
      return integer(uint8_t{0}, 0, 255);
    case tensor::DType::kInt8:
      return integer(int8_t{0}, -128, 127);
    case tensor::DType::kUint16:
      return integer(uint16_t{0}, 0, 65535);
    case tensor::DType::kInt16:
      return integer(int16_t{0}, -32768, 32767);
    case tensor::DType::kInt32:
      return integer(int32_t{0}, INT32_MIN, INT32_MAX);
    case tensor::DType::kInt64:
      return integer(int64_t{0}, L::min(), L::max());
    case tensor::DType::kFloat16:
    case tensor::DType::kFloat32: {
      float v = 0;
      if (!absl::SimpleAtof(number, &v)) return false;
      if (dtype == tensor::DType::kFloat32) {
        put(v);
      } else {
        put(tensor::FloatToHalf(v));
      }
      return true;
    }
    case tensor::DType::kFloat64: {
      double v = 0;
      if (!absl::SimpleAtod(number, &v)) return false;
      put(v);
      return true;
    }
  }
  return false;
}

// Checks the brackets of `text` against the shape: none at all (the
// numbers in order, as "1 2 3"), or lists nested exactly as deep as the
// shape has dimensions, each holding that dimension's number of items (any
// number for a first dimension of -1), numbers only in the innermost. So
// for [-1, 4], "[[1,2,3,4,5],[6,7,8]]" is refused rather than packed as two
// rows of 4. Iterative, and stops at the first list deeper than the shape.
absl::Status CheckNesting(const FieldSpec& spec, std::string_view text) {
  const size_t open = text.find('[');
  if (open == std::string_view::npos) {
    if (text.find(']') == std::string_view::npos) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("field '", spec.name, "': a ']' without its '['"));
  }
  const size_t rank = spec.shape.size();
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", spec.name, "': ", what, "; ", TypeText(spec), " nests ",
        rank, rank == 1 ? " list" : " lists", " deep"));
  };
  std::vector<uint64_t> items;  // Per open list, outermost first.
  bool in_number = false;
  bool closed = false;  // The outermost list has ended.
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool separator = c == ' ' || c == '\t' || c == '\r' ||
                           c == '\n' || c == ',' || c == '[' || c == ']';
    if (!separator) {
      if (!in_number) {
        if (closed || items.size() != rank) {
          return bad(absl::StrCat("a number at depth ", items.size()));
        }
        ++items.back();
      }
      in_number = true;
      continue;
    }
    in_number = false;
    if (c == '[') {
      if (closed) return bad("a second list after the outermost one");
      if (items.size() == rank) {
        return bad(absl::StrCat("a list at depth ", items.size() + 1));
      }
      if (!items.empty()) ++items.back();
      items.push_back(0);
    } else if (c == ']') {
      if (items.empty()) return bad("a ']' without its '['");
      const size_t level = items.size() - 1;
      const int64_t want = spec.shape[level];
      if (want != -1 && items.back() != static_cast<uint64_t>(want)) {
        return bad(absl::StrCat("a list at depth ", level + 1, " holds ",
                                items.back(), " items where dimension ",
                                level, " is ", want));
      }
      items.pop_back();
      closed = items.empty();
    }
  }
  if (!items.empty()) return bad("a '[' without its ']'");
  return absl::OkStatus();
}

class NdarrayKind final : public FieldKind {
 public:
  std::string_view name() const override { return "ndarray"; }
  Passthrough passthrough(const FieldSpec& spec) const override {
    return Ragged(spec) ? Passthrough::kRaggedRows : Passthrough::kDense;
  }
  bool declares_dtype() const override { return true; }

  absl::Status CheckSpec(FieldSpec* spec) const override {
    uint64_t bytes = tensor::DTypeSize(spec->dtype);
    for (size_t i = 0; i < spec->shape.size(); ++i) {
      const int64_t d = spec->shape[i];
      if (d == -1 && i == 0) continue;
      if (d == -1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape: dimension ", i, " is -1; only the first may vary"));
      }
      if (d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape: dimension ", i, " is ", d,
                         "; dimensions are positive, or -1 for the first"));
      }
      if (static_cast<uint64_t>(d) > kMaxFieldBytes / bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape: ", Ragged(*spec) ? "a row of " : "", TypeText(*spec),
            " is over the 4 GiB a record field may hold"));
      }
      bytes *= static_cast<uint64_t>(d);
    }
    return absl::OkStatus();
  }

  absl::Status CheckValue(const FieldSpec& spec,
                          std::string_view value) const override {
    const uint64_t row = RowBytes(spec);
    if (!Ragged(spec)) {
      const uint64_t need =
          spec.shape.empty() ? row : row * static_cast<uint64_t>(spec.shape[0]);
      if (value.size() == need) return absl::OkStatus();
      return absl::DataLossError(absl::StrCat("field '", spec.name, "' has ",
                                              value.size(), " bytes, ",
                                              TypeText(spec), " needs ", need));
    }
    if (value.size() % row != 0) {
      return absl::DataLossError(
          absl::StrCat("field '", spec.name, "': ", value.size(),
                       " bytes is not whole rows of ", row, " bytes (",
                       TypeText(spec), ")"));
    }
    return CheckMaxLength(spec, value.size() / row, "rows");
  }

  absl::Status CheckContent(const FieldSpec& spec,
                            std::string_view value) const override {
    if (absl::Status s = CheckValue(spec, value); !s.ok()) return s;
    if (spec.dtype != tensor::DType::kBool) return absl::OkStatus();
    for (size_t i = 0; i < value.size(); ++i) {
      const auto b = static_cast<unsigned char>(value[i]);
      if (b > 1) {
        return absl::DataLossError(absl::StrCat("field '", spec.name,
                                                "': byte ", i, " is ", b,
                                                "; a bool is 0 or 1"));
      }
    }
    return absl::OkStatus();
  }

  // Numbers separated by spaces or commas, with no brackets ("1 2 3") or
  // nested as the shape is ("[[0.5, 1], [2, 3]]" for [2, 2]; CheckNesting).
  // The count must fit the shape.
  absl::StatusOr<std::string> FromText(const FieldSpec& spec,
                                       std::string_view text) const override {
    if (absl::Status s = CheckNesting(spec, text); !s.ok()) return s;
    std::string out;
    uint64_t count = 0;
    for (absl::string_view number :
         absl::StrSplit(absl::string_view(text.data(), text.size()),
                        absl::ByAnyChar(" \t\r\n,[]"), absl::SkipEmpty())) {
      if (!AppendElement(spec.dtype, number, &out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", spec.name, "': element ", count, " '", number,
            "' is not a ", std::string(tensor::DTypeName(spec.dtype))));
      }
      ++count;
    }
    if (absl::Status s = CheckValue(spec, out); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", spec.name, "': ", count,
                       " numbers do not fit ", TypeText(spec)));
    }
    return out;
  }
};

std::unique_ptr<FieldKind> MakeNdarrayKind() {
  return std::make_unique<NdarrayKind>();
}

}  // namespace

STOKER_REGISTER_FIELD_KIND(MakeNdarrayKind);

}  // namespace stoker::dataset
