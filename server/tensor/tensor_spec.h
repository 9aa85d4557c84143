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
//
// A ragged field (docs/pipeline-design.md §4.1) is two tensors: its values,
// whose first dimension is -1 per sample (rows or bytes of every sample,
// back to back, in a batch), and "<name>.offsets", int64, whose
// `offsets_for` names the values tensor: n + 1 prefix sums in a batch of n
// samples (shape {} per sample: one count).
struct TensorSpec {
  std::string name;
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;
  // On an offsets tensor: the name of the values tensor it indexes.
  std::string offsets_for;
  // On the values of a str field: the bytes are UTF-8 text.
  bool utf8 = false;

  // Product of the shape times the element size.
  // REQUIRES: no dimension is negative.
  size_t bytes() const;
};

}  // namespace stoker::tensor

#endif  // STOKER_SERVER_TENSOR_TENSOR_SPEC_H_
