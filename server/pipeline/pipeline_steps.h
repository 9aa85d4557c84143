// PipelineSteps: what Pipeline::Create builds from a config and
// BoundPipeline runs per sample. Internal to server/pipeline/ (pipeline.cc
// runs it, pipeline_create.cc builds it, pipeline_bind.cc binds it to a
// dataset's fields).
#ifndef STOKER_SERVER_PIPELINE_PIPELINE_STEPS_H_
#define STOKER_SERVER_PIPELINE_PIPELINE_STEPS_H_

#include <memory>
#include <string>
#include <vector>

#include "server/pipeline/op.h"
#include "server/pipeline/passthrough.h"
#include "server/pipeline/pixel_convert.h"

namespace stoker::pipeline {

// The per-sample ops of a pipeline by kind, each list in config order;
// Create checks that the kinds come in this order, so running the lists one
// after another runs the ops in config order. Format ops are not here: they
// do not depend on the sample, and Create resolves them into each view's
// format.
struct PipelineSteps {
  // An op bound to the spatial field in `slot` (an index into decodes).
  template <typename Op>
  struct Bound {
    std::unique_ptr<Op> op;
    int slot = 0;
  };

  // One view: its instances' per-sample ops and what they write. The list
  // form has one, unnamed.
  struct View {
    std::string name;
    int count = 1;
    std::vector<std::unique_ptr<GeometryOp>> geometry;
    std::vector<Bound<PixelOp>> pixel;
    std::vector<Bound<TensorOp>> tensor;
    OutputFormat format;
    int out_height = 0, out_width = 0;
  };

  std::vector<DecodeSpec> decodes;
  std::vector<BoundSelection> selections;  // Used by Bind, not per sample.
  std::vector<View> views;                 // At least one.
  // At most one batch op: it owns the labels. Not a Bound<BatchOp>: clang 14
  // (the fuzz build's compiler) crashes in TBAA reading the slot of an
  // optional<Bound<BatchOp>>.
  std::unique_ptr<BatchOp> batch;
  int batch_slot = 0;  // Of the image it mixes, an index into decodes.
};

// The format a decoded field is written in: the pipeline's for an image; a
// nearest field (class ids) stays uint8, in the pipeline's layout.
inline OutputFormat FieldFormat(const OutputFormat& format,
                                const DecodeSpec& decode) {
  if (!decode.nearest) return format;
  OutputFormat ids;
  ids.layout = format.layout;
  return ids;
}

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_PIPELINE_STEPS_H_
