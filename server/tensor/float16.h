// The float32 <-> float16 conversions behind float16 outputs.
//
// Thread-safety: a pure function.
#ifndef STOKER_SERVER_TENSOR_FLOAT16_H_
#define STOKER_SERVER_TENSOR_FLOAT16_H_

#include <cstdint>

namespace stoker::tensor {

// IEEE 754 binary16 bits of `value`, rounded to nearest, ties to even;
// overflow gives infinity, underflow gives subnormals or signed zero, and
// NaN stays NaN.
uint16_t FloatToHalf(float value);

// The float32 value of binary16 `bits` (exact: every half is a float).
float HalfToFloat(uint16_t bits);

}  // namespace stoker::tensor

#endif  // STOKER_SERVER_TENSOR_FLOAT16_H_
