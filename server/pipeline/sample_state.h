// SampleState: what one sample's ops work on while BoundPipeline::Run runs
// them. It holds one View, which every geometry op edits and every spatial
// field shares (so a crop or a flip is one random choice for all of them),
// and per spatial field its encoded bytes, its decoder and, once rendered,
// its output-size image.
//
// Thread-safety: not thread-safe; one per sample, on the worker's stack.
#ifndef STOKER_SERVER_PIPELINE_SAMPLE_STATE_H_
#define STOKER_SERVER_PIPELINE_SAMPLE_STATE_H_

#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "server/pipeline/decoders/image_decoder.h"
#include "server/pipeline/image_buffer.h"
#include "server/pipeline/image_plan.h"

namespace stoker::pipeline {

// One spatial field of one sample.
struct ImageField {
  std::string_view encoded;  // Borrowed for the sample's run.
  // Has read `encoded`'s header; owned by the sample's DecoderSet.
  ImageDecoder* decoder = nullptr;
  // After render: the view at its output size, uint8 HWC, not yet mirrored
  // when flip_pending (the converter mirrors it as it writes the output).
  // In the batch buffer itself or in the sample's render buffers.
  ImageBuffer rendered;
  bool flip_pending = false;
};

class SampleState {
 public:
  // Slots for `spatial_fields` fields, as the pipeline was bound.
  explicit SampleState(int spatial_fields) : fields_(spatial_fields) {}

  SampleState(const SampleState&) = delete;
  SampleState& operator=(const SampleState&) = delete;

  View& view() { return view_; }
  ImageField& field(int slot) { return fields_[slot]; }
  absl::Span<ImageField> spatial() { return absl::MakeSpan(fields_); }

 private:
  View view_;
  // One image per sample is the common case; it stays on the stack.
  absl::InlinedVector<ImageField, 2> fields_;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_SAMPLE_STATE_H_
