// The element types of the stoker.v1 wire, one row each: the DType enum's
// number (proto/stoker/v1/stoker.proto), numpy's name and the bytes per
// element. Every dtype is little-endian; bool is one byte, 0 or 1.
//
// The one C++ table of them, shared by the daemon and the C++ client like
// the payload codec beside it: the daemon's dtypes (server/tensor/dtype.h)
// and the client's (client/lib/dtype.cc) read their names and sizes here,
// and the daemon its wire numbers. The Python client derives its dtypes
// from the enum's names (client/python/stoker/transports.py). The tests pin
// the three: tests/tensor/dtype_pin_test.cc this table to the enum and to
// both C++ sides, tests/python/test_client_dtypes.py the Python table to
// this one.
//
// Header-only constant data with no dependencies. Thread-safe.
#ifndef STOKER_PROTO_DTYPE_TABLE_H_
#define STOKER_PROTO_DTYPE_TABLE_H_

#include <array>
#include <cstddef>
#include <string_view>

namespace stoker::wire {

struct DTypeRow {
  int wire;  // The stoker.v1 DType number.
  std::string_view name;
  size_t size;
};

// In the order of the daemon's tensor::DType, whose value indexes it.
inline constexpr std::array<DTypeRow, 10> kDTypeTable = {{
    {10, "bool", 1},
    {1, "uint8", 1},
    {8, "int8", 1},
    {9, "uint16", 2},
    {7, "int16", 2},
    {6, "int32", 4},
    {2, "int64", 8},
    {3, "float16", 2},
    {4, "float32", 4},
    {5, "float64", 8},
}};

// The row of wire number `wire`; null for DTYPE_UNSPECIFIED and for a
// number this build does not know (a newer peer's).
constexpr const DTypeRow* FindDTypeRow(int wire) {
  for (const DTypeRow& row : kDTypeTable) {
    if (row.wire == wire) return &row;
  }
  return nullptr;
}

}  // namespace stoker::wire

#endif  // STOKER_PROTO_DTYPE_TABLE_H_
