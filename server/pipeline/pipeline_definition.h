// The definition of a pipeline as one canonical line of text: its ops and
// their arguments in config order, its views, and the decode limit it runs
// under. Two pipelines with one definition make the same batches from the
// same records. The ranks of a job compare it (service/admission.h), so
// that a pipeline redefined by a reload does not join a job begun with the
// old one.
//
//   decode_image{} random_resized_crop{scale=[0.08,1],size=32} |
//   max_decode_pixels=268435456
//
// Thread-safe: pure.
#ifndef STOKER_SERVER_PIPELINE_PIPELINE_DEFINITION_H_
#define STOKER_SERVER_PIPELINE_PIPELINE_DEFINITION_H_

#include <cstdint>
#include <string>

#include "server/pipeline/pipeline.h"

namespace stoker::pipeline {

std::string PipelineDefinition(const PipelineConfig& config,
                               int64_t max_decode_pixels);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_PIPELINE_DEFINITION_H_
