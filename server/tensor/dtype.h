// Element types of the tensors Stoker serves and stores: the dtypes of a
// pipeline's outputs and of a dataset's typed fields (ndarray, scalars).
//
// Every dtype is little-endian in a record and in a batch. The names are
// numpy's ("uint8", "float16", "bool"); names, sizes and the numbers of the
// stoker.v1 DType enum come from the table the daemon and the C++ client
// share (proto/dtype_table.h), whose rows are in the order of this enum.
//
// Thread-safety: plain values and pure functions.
#ifndef STOKER_SERVER_TENSOR_DTYPE_H_
#define STOKER_SERVER_TENSOR_DTYPE_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace stoker::tensor {

enum class DType {
  kBool,
  kUint8,
  kInt8,
  kUint16,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kFloat32,
  kFloat64,
};

// Every dtype, in the order of the enum.
inline constexpr std::array<DType, 10> kAllDTypes = {
    DType::kBool,    DType::kUint8,  DType::kInt8,  DType::kUint16,
    DType::kInt16,   DType::kInt32,  DType::kInt64, DType::kFloat16,
    DType::kFloat32, DType::kFloat64};

// Bytes per element; bool is one byte, 0 or 1.
size_t DTypeSize(DType t);

// numpy's name: "bool", "uint8", ..., "float64".
std::string_view DTypeName(DType t);

// Its number in the stoker.v1 DType enum (DTYPE_<NAME>).
int DTypeWireNumber(DType t);

// The dtype DTypeName gives `name` for; nullopt for any other string.
std::optional<DType> DTypeFromName(std::string_view name);

// "bool, uint8, int8, ... or float64": every name, for messages.
std::string_view DTypeNames();

}  // namespace stoker::tensor

#endif  // STOKER_SERVER_TENSOR_DTYPE_H_
