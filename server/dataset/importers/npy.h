// A reader of NumPy .npy files (format 1.0, 2.0 and 3.0): the header's
// dtype, shape and order, and the data after it. Only little-endian (or
// one-byte) numeric and bool dtypes in C order: a Fortran-order or object
// array is refused, never converted. Thread-safe: a pure function.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_NPY_H_
#define STOKER_SERVER_DATASET_IMPORTERS_NPY_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tensor/dtype.h"

namespace stoker::dataset {

struct NpyArray {
  tensor::DType dtype = tensor::DType::kUint8;
  std::vector<int64_t> shape;  // {} for a 0-d array.
  std::string_view data;       // C-order elements; borrows the input.
};

// DataLoss saying what is wrong: "not a .npy file (bad magic)",
// "fortran_order arrays are not supported", "dtype '|O' is not supported
// (object arrays hold Python objects)", "data is 12 bytes, shape (2, 4) of
// <f4 needs 32".
absl::StatusOr<NpyArray> ParseNpy(std::string_view file);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_NPY_H_
