#include "server/dataset/importers/number_list.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/tensor/float16.h"

namespace stoker::dataset {
namespace {

template <typename T>
void Put(T v, char* at) {
  std::memcpy(at, &v, sizeof(v));
}

// Writes `v` as one element of `dtype` at `at`; false if it is not a value
// of that dtype.
bool Integer(tensor::DType dtype, int64_t v, char* at) {
  auto in = [v](auto lo, auto hi) { return v >= lo && v <= hi; };
  using tensor::DType;
  switch (dtype) {
    case DType::kBool:
      return in(0, 1) && (Put<uint8_t>(v, at), true);
    case DType::kUint8:
      return in(0, 255) && (Put<uint8_t>(v, at), true);
    case DType::kInt8:
      return in(-128, 127) && (Put<int8_t>(v, at), true);
    case DType::kUint16:
      return in(0, 65535) && (Put<uint16_t>(v, at), true);
    case DType::kInt16:
      return in(-32768, 32767) && (Put<int16_t>(v, at), true);
    case DType::kInt32:
      return in(std::numeric_limits<int32_t>::min(),
                std::numeric_limits<int32_t>::max()) &&
             (Put<int32_t>(v, at), true);
    case DType::kInt64:
      Put<int64_t>(v, at);
      return true;
    case DType::kFloat16:
      Put(tensor::FloatToHalf(static_cast<float>(v)), at);
      return true;
    case DType::kFloat32:
      Put(static_cast<float>(v), at);
      return true;
    case DType::kFloat64:
      Put(static_cast<double>(v), at);
      return true;
  }
  return false;
}

bool Element(tensor::DType dtype, int64_t v, char* at) {
  return Integer(dtype, v, at);
}

bool Element(tensor::DType dtype, float v, char* at) {
  switch (dtype) {
    case tensor::DType::kFloat16:
      Put(tensor::FloatToHalf(v), at);
      return true;
    case tensor::DType::kFloat32:
      Put(v, at);
      return true;
    case tensor::DType::kFloat64:
      Put(static_cast<double>(v), at);
      return true;
    default:
      // An integer dtype takes a whole number within int64's range; every
      // float of magnitude below 2^63 converts exactly.
      if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) >= 0x1p63f) {
        return false;
      }
      return Integer(dtype, static_cast<int64_t>(v), at);
  }
}

std::string Show(int64_t v) { return absl::StrCat(v); }
std::string Show(float v) { return absl::StrFormat("%.9g", v); }

template <typename T>
absl::StatusOr<std::string> ToArray(const FieldSpec& spec,
                                    absl::Span<const T> numbers) {
  const size_t size = tensor::DTypeSize(spec.dtype);
  std::string out(numbers.size() * size, '\0');
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (!Element(spec.dtype, numbers[i], out.data() + i * size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", spec.name, "': element ", i, " '", Show(numbers[i]),
          "' is not a ", std::string(tensor::DTypeName(spec.dtype))));
    }
  }
  if (absl::Status s = spec.kind->CheckValue(spec, out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", spec.name, "': ", numbers.size(), " numbers do not fit ",
        std::string(tensor::DTypeName(spec.dtype)), " [",
        absl::StrJoin(spec.shape, ", "), "]"));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> Int64sToArray(const FieldSpec& spec,
                                          absl::Span<const int64_t> numbers) {
  return ToArray(spec, numbers);
}

absl::StatusOr<std::string> FloatsToArray(const FieldSpec& spec,
                                          absl::Span<const float> numbers) {
  return ToArray(spec, numbers);
}

}  // namespace stoker::dataset
