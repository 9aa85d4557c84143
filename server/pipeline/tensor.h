// Tensor descriptions shared by the pipeline and the batcher: element types,
// per-sample output specs, and the float16 conversion the pipeline writes.
//
// Thread-safety: plain values and pure functions.
#ifndef STOKER_SERVER_PIPELINE_TENSOR_H_
#define STOKER_SERVER_PIPELINE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::pipeline {

enum class DType { kUint8, kInt64, kFloat16, kFloat32 };

// Bytes per element.
size_t DTypeSize(DType t);

// "uint8", "int64", "float16" or "float32".
std::string_view DTypeName(DType t);

// One named output of a pipeline for one sample. A scalar has shape {}.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;

  // Product of the shape times the element size.
  size_t bytes() const;
};

// IEEE 754 binary16 bits of `value`, rounded to nearest, ties to even;
// overflow gives infinity, underflow gives subnormals or signed zero, and
// NaN stays NaN.
uint16_t FloatToHalf(float value);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_TENSOR_H_
