#include "server/tensor/float16.h"

#include <cstring>

namespace stoker::tensor {

uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;

  if (exponent == 0xff) {  // Infinity or NaN; NaN keeps a quiet bit.
    return sign | 0x7c00u | (mantissa != 0 ? 0x200u : 0u);
  }
  // Unbiased exponent re-biased for half (bias 15 instead of 127).
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 0x1f) return sign | 0x7c00u;  // Overflow.
  if (half_exponent <= 0) {
    // Subnormal half or zero: shift the mantissa (with its implicit one)
    // right, rounding to nearest even on the bits shifted out.
    if (half_exponent < -10) return sign;
    mantissa |= 0x800000u;
    const int shift = 14 - half_exponent;
    const uint32_t half_mantissa = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t result = half_mantissa;
    if (rest > halfway || (rest == halfway && (half_mantissa & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  uint32_t result =
      (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent, up to infinity.
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {  // Infinity or NaN.
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {
    // A subnormal half is a normal float: shift the mantissa up until its
    // leading one is the implicit bit.
    int e = -14;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    out = sign | (static_cast<uint32_t>(e + 127) << 23) |
          ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof(value));
  return value;
}

}  // namespace stoker::tensor
