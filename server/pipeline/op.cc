#include "server/pipeline/op.h"

namespace stoker::pipeline {

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kDecode:
      return "decode";
    case OpKind::kFields:
      return "fields";
    case OpKind::kGeometry:
      return "geometry";
    case OpKind::kPixel:
      return "pixel";
    case OpKind::kFormat:
      return "format";
    case OpKind::kTensor:
      return "tensor";
    case OpKind::kBatch:
      return "batch";
  }
  return "unknown";
}

OpKind KindOf(const AnyOp& op) {
  // Indexed by the alternatives of AnyOp, in order.
  static constexpr OpKind kKinds[] = {OpKind::kDecode,   OpKind::kFields,
                                      OpKind::kGeometry, OpKind::kPixel,
                                      OpKind::kFormat,   OpKind::kTensor,
                                      OpKind::kBatch};
  static_assert(std::size(kKinds) == std::variant_size_v<AnyOp>);
  return kKinds[op.index()];
}

}  // namespace stoker::pipeline
