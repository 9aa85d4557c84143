#include "server/pipeline/box_reduce.h"

#include <vector>

namespace stoker::pipeline {
namespace {

// Writes one output row from the column sums of its ky source rows: each
// output value is the sum of kx neighbouring pixels' sums, times
// `multiplier` / 2^16, rounded. kKx > 0 fixes kx at compile time, so that
// the inner loop unrolls; 0 reads it from `kx`.
template <int kKx>
void ReduceRow(const uint16_t* sums, int out_width, int kx, uint32_t multiplier,
               uint8_t* out) {
  const int n = kKx > 0 ? kKx : kx;
  for (int x = 0; x < out_width; ++x, sums += 3 * n) {
    for (int c = 0; c < 3; ++c) {
      uint32_t sum = 0;
      for (int j = 0; j < n; ++j) sum += sums[3 * j + c];
      out[3 * x + c] = static_cast<uint8_t>((sum * multiplier + 32768) >> 16);
    }
  }
}

}  // namespace

void BoxReduce(const uint8_t* src, size_t stride, int width, int height,
               int kx, int ky, uint8_t* dst, size_t dst_stride) {
  const int out_width = width / kx;
  const int out_height = height / ky;
  const int values = 3 * out_width * kx;  // Bytes of a row that are read.
  // Dividing by n = kx * ky as a multiply: 2^16 / n is off by at most 1/2,
  // which moves a mean of at most 255 n by at most n / 512 < 1/2.
  const int n = kx * ky;
  const uint32_t multiplier = (65536 + n / 2) / n;
  // Column sums of ky rows first, in uint16 (at most 255 * 256): a plain
  // loop over consecutive bytes, which the compiler vectorizes.
  std::vector<uint16_t> sums(values);
  for (int y = 0; y < out_height; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * ky * stride;
    for (int i = 0; i < values; ++i) sums[i] = row[i];
    for (int r = 1; r < ky; ++r) {
      row += stride;
      for (int i = 0; i < values; ++i) sums[i] += row[i];
    }
    uint8_t* out = dst + static_cast<size_t>(y) * dst_stride;
    switch (kx) {
      case 1:
        ReduceRow<1>(sums.data(), out_width, kx, multiplier, out);
        break;
      case 2:
        ReduceRow<2>(sums.data(), out_width, kx, multiplier, out);
        break;
      case 3:
        ReduceRow<3>(sums.data(), out_width, kx, multiplier, out);
        break;
      default:
        ReduceRow<0>(sums.data(), out_width, kx, multiplier, out);
        break;
    }
  }
}

}  // namespace stoker::pipeline
