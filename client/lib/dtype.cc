// The client's dtypes: names, sizes and the conversion from the wire.
#include "client/lib/internal.h"
#include "stoker/client.h"

namespace stoker {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kUnknown:
      return "unknown";
    case DType::kUint8:
      return "uint8";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt16:
      return "int16";
    case DType::kInt8:
      return "int8";
    case DType::kUint16:
      return "uint16";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kUnknown:
      return 0;
    case DType::kUint8:
    case DType::kInt8:
    case DType::kBool:
      return 1;
    case DType::kFloat16:
    case DType::kInt16:
    case DType::kUint16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

DType FromProto(v1::DType t) {
  switch (t) {
    case v1::DTYPE_UINT8:
      return DType::kUint8;
    case v1::DTYPE_INT64:
      return DType::kInt64;
    case v1::DTYPE_FLOAT16:
      return DType::kFloat16;
    case v1::DTYPE_FLOAT32:
      return DType::kFloat32;
    case v1::DTYPE_FLOAT64:
      return DType::kFloat64;
    case v1::DTYPE_INT32:
      return DType::kInt32;
    case v1::DTYPE_INT16:
      return DType::kInt16;
    case v1::DTYPE_INT8:
      return DType::kInt8;
    case v1::DTYPE_UINT16:
      return DType::kUint16;
    case v1::DTYPE_BOOL:
      return DType::kBool;
    default:
      return DType::kUnknown;
  }
}

}  // namespace stoker
