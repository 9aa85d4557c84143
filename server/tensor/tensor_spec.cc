#include "server/tensor/tensor_spec.h"

namespace stoker::tensor {

size_t TensorSpec::bytes() const {
  size_t elements = 1;
  for (int64_t d : shape) elements *= static_cast<size_t>(d);
  return elements * DTypeSize(dtype);
}

}  // namespace stoker::tensor
