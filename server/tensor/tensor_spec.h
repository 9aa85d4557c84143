// TensorSpec: the name, dtype and shape of one tensor, as a pipeline
// declares its per-sample outputs and a batch describes its tensors.
//
// Thread-safety: a plain value.
#ifndef STOKER_SERVER_TENSOR_TENSOR_SPEC_H_
#define STOKER_SERVER_TENSOR_TENSOR_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/tensor/dtype.h"

namespace stoker::tensor {

// One named tensor. A scalar has shape {}.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;

  // Product of the shape times the element size.
  // REQUIRES: no dimension is negative.
  size_t bytes() const;
};

}  // namespace stoker::tensor

#endif  // STOKER_SERVER_TENSOR_TENSOR_SPEC_H_
