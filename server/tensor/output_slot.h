// OutputSlot: what one per-sample output of a pipeline takes in a batch
// buffer, so that the batch layout (service/batch.h) can place it without
// knowing what the pipeline does.
//
// Thread-safety: a plain value.
#ifndef STOKER_SERVER_TENSOR_OUTPUT_SLOT_H_
#define STOKER_SERVER_TENSOR_OUTPUT_SLOT_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "server/tensor/tensor_spec.h"

namespace stoker::tensor {

struct OutputSlot {
  // kDense: spec.bytes() per sample. kRagged: up to max_sample_bytes of
  // values per sample (spec.shape is {-1, trailing...}). kOffsets: one
  // int64 per sample, the sample's row (or byte) count of `values_slot`,
  // which the batch turns into n + 1 prefix sums.
  enum class Kind { kDense, kRagged, kOffsets };

  TensorSpec spec;
  Kind kind = Kind::kDense;
  size_t max_sample_bytes = 0;  // dense: spec.bytes(); offsets: 8.
  size_t row_bytes = 1;         // kRagged: bytes of one row.
  int values_slot = -1;         // kOffsets: the kRagged slot it counts.

  // A dense slot of `spec`.
  static OutputSlot Dense(TensorSpec spec) {
    OutputSlot slot;
    slot.max_sample_bytes = spec.bytes();
    slot.spec = std::move(spec);
    return slot;
  }
};

}  // namespace stoker::tensor

#endif  // STOKER_SERVER_TENSOR_OUTPUT_SLOT_H_
