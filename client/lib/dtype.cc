// The client's dtypes: names, sizes and the conversion from the wire, read
// from the table the daemon shares (proto/dtype_table.h). A DType's value is
// its stoker.v1 DType number (client.h adds new ones at the end, as the
// enum does); tests/tensor/dtype_pin_test.cc checks both.
#include "client/lib/internal.h"
#include "proto/dtype_table.h"
#include "stoker/client.h"

namespace stoker {

std::string_view DTypeName(DType t) {
  const wire::DTypeRow* row = wire::FindDTypeRow(static_cast<int>(t));
  return row != nullptr ? row->name : "unknown";
}

size_t DTypeSize(DType t) {
  const wire::DTypeRow* row = wire::FindDTypeRow(static_cast<int>(t));
  return row != nullptr ? row->size : 0;
}

DType FromProto(v1::DType t) {
  return wire::FindDTypeRow(t) != nullptr ? static_cast<DType>(t)
                                          : DType::kUnknown;
}

}  // namespace stoker
