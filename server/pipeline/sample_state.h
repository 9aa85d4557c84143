// SampleState: what one sample's ops work on while BoundPipeline::Run runs
// them. Per view instance (one, unless the pipeline has views:
// docs/pipeline-design.md §4.4) it holds one View, which that instance's
// geometry ops edit and every spatial field shares (so a crop or a flip is
// one random choice for all of them); per spatial field the encoded bytes
// and decoder, which every instance shares; and per instance and field,
// once rendered, the output-size image.
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
};

// One spatial field of one view instance, after render: the view at its
// output size, uint8 HWC, not yet mirrored when flip_pending (the converter
// mirrors it as it writes the output). In the batch buffer itself or in
// the sample's render buffers.
struct RenderedField {
  ImageBuffer image;
  bool flip_pending = false;
};

class SampleState {
 public:
  // Slots for `spatial_fields` fields of `instances` view instances, as the
  // pipeline was bound.
  SampleState(int spatial_fields, int instances)
      : instances_(instances),
        views_(instances),
        fields_(spatial_fields),
        rendered_(static_cast<size_t>(spatial_fields) * instances) {}

  SampleState(const SampleState&) = delete;
  SampleState& operator=(const SampleState&) = delete;

  View& view(int instance) { return views_[instance]; }
  absl::Span<const View> views() const { return views_; }
  ImageField& field(int slot) { return fields_[slot]; }
  // Field `slot` of `instance`; the instances of one field are adjacent,
  // as RenderViews writes them.
  RenderedField& rendered(int instance, int slot) {
    return rendered_[static_cast<size_t>(slot) * instances_ + instance];
  }

 private:
  const int instances_;
  // One instance with one image is the common case; it stays on the stack.
  absl::InlinedVector<View, 1> views_;
  absl::InlinedVector<ImageField, 2> fields_;
  absl::InlinedVector<RenderedField, 2> rendered_;
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_SAMPLE_STATE_H_
