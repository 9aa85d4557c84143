#include "server/tensor/dtype.h"

#include <string>

#include "proto/dtype_table.h"

namespace stoker::tensor {

static_assert(kAllDTypes.size() == wire::kDTypeTable.size(),
              "every dtype has a row of proto/dtype_table.h");

size_t DTypeSize(DType t) {
  return wire::kDTypeTable[static_cast<size_t>(t)].size;
}

std::string_view DTypeName(DType t) {
  return wire::kDTypeTable[static_cast<size_t>(t)].name;
}

int DTypeWireNumber(DType t) {
  return wire::kDTypeTable[static_cast<size_t>(t)].wire;
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
