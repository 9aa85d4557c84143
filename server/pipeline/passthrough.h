// Pass-through: the fields of a record that no op binds, copied into the
// batch as they are (docs/pipeline-design.md §4.1).
//
//   field kind                     outputs per sample
//   int64, float32, float64        "<name>", shape {}: one memcpy
//   ndarray of fixed shape         "<name>", its shape: one memcpy
//   ndarray [-1, ...], bytes, str  "<name>" (values, up to the slot's
//   image without decode_image     max_length rows or bytes) and
//                                  "<name>.offsets" (its count, int64)
//
// Values are little-endian in the record and in the batch, so a copy is
// the whole conversion. The fields ops, drop_fields and ragged_limit, are
// registered here: they are about the pass-through and nothing else.
//
// Thread-safety: plain values and pure functions.
#ifndef STOKER_SERVER_PIPELINE_PASSTHROUGH_H_
#define STOKER_SERVER_PIPELINE_PASSTHROUGH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/pipeline/op.h"
#include "server/pipeline/pipeline.h"
#include "server/tensor/output_slot.h"

namespace stoker::pipeline {

// The Status payload, under this type URL, on a ragged_limit overflow:
// "skip" (leave the sample out) or "fail" (end the stream).
inline constexpr char kRaggedOverflowPayload[] = "stoker.ragged_overflow";

// What the ragged_limit that `status` overflowed says to do (kSkip or
// kFail); nullopt when `status` is not an overflow.
std::optional<RaggedOverflow> RaggedOverflowOf(const absl::Status& status);

// A fields op of a created pipeline, with where it stands in the config
// for messages ("pipeline 'p': op[1] 'drop_fields' (line 7): ").
struct BoundSelection {
  FieldSelection selection;
  std::string context;
};

// One field a bound pipeline copies from the record into the batch.
struct PassthroughField {
  size_t record_index = 0;
  int slot = 0;  // Its output; ragged: the values, offsets at slot + 1.
  InputField::Passthrough kind = InputField::Passthrough::kDense;
  size_t bytes = 0;       // Dense: the value's exact size.
  size_t row_bytes = 1;   // Ragged: one row (1 for bytes).
  uint64_t max_rows = 0;  // Ragged: the slot's room.
  // Ragged, when a ragged_limit set max_rows: what a longer value does.
  std::optional<RaggedOverflow> overflow;
  bool utf8 = false;  // A str: truncated only at a character boundary.
  std::string name;  // For messages.
};

// Appends to *slots and *fields what the schema's fields not in `bound`
// (the decoded images) pass through as, in schema order, after applying
// `selections` (config order). InvalidArgument as Pipeline::Bind says.
absl::Status BindPassthrough(absl::Span<const InputField> schema,
                             const std::vector<bool>& bound,
                             const std::vector<BoundSelection>& selections,
                             std::vector<tensor::OutputSlot>* slots,
                             std::vector<PassthroughField>* fields);

// Copies one record's pass-through fields into dst (indexed by slot).
// DataLoss for a dense value of the wrong size or a ragged one that is not
// whole rows; an overflow as its ragged_limit says.
absl::Status CopyPassthrough(absl::Span<const PassthroughField> fields,
                             absl::Span<const std::string_view> record,
                             absl::Span<uint8_t* const> dst);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_PASSTHROUGH_H_
