// Running a pipeline on one (image, int64 label) record at a time, and
// binding one both in full and kRendered (what a helper or a GPU
// finishes): what the pipeline tests share.
#ifndef STOKER_TESTS_TESTING_PIPELINE_RUNS_H_
#define STOKER_TESTS_TESTING_PIPELINE_RUNS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/pipeline/pipeline.h"

namespace stoker::testing {

// (image, label int64).
extern const std::vector<pipeline::InputField> kImageLabelSchema;

struct BoundBoth {
  std::unique_ptr<pipeline::BoundPipeline> full, rendered;
};

// Creates the pipeline and binds it both ways; a failure is a test failure
// and leaves both null.
BoundBoth MustBindBoth(const pipeline::PipelineConfig& config);

// Runs `bound` on the record (image, label) with `rng`: one buffer per
// output.
absl::StatusOr<std::vector<std::string>> RunRecord(
    const pipeline::BoundPipeline& bound, const std::string& image,
    int64_t label, pipeline::SampleRng& rng,
    pipeline::StageTimes* times = nullptr);

// RunRecord of (image, label 3) as sample `id` of epoch 1, seed 5; a
// failure is a test failure.
std::vector<std::string> RunSample(const pipeline::BoundPipeline& bound,
                                   const std::string& image, uint64_t id);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_PIPELINE_RUNS_H_
