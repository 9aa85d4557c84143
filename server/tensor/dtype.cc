#include "server/tensor/dtype.h"

#include <string>

namespace stoker::tensor {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
      return 1;
    case DType::kUint16:
    case DType::kInt16:
    case DType::kFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kUint8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kUint16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "unknown";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (DTypeName(t) == name) return t;
  }
  return std::nullopt;
}

std::string_view DTypeNames() {
  static const std::string* const names = [] {
    auto* out = new std::string;
    for (size_t i = 0; i < kAllDTypes.size(); ++i) {
      if (i > 0) *out += i + 1 == kAllDTypes.size() ? " or " : ", ";
      *out += DTypeName(kAllDTypes[i]);
    }
    return out;
  }();
  return *names;
}

}  // namespace stoker::tensor
