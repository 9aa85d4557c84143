#include "tests/testing/pipeline_runs.h"

#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::testing {

using ::stoker::pipeline::BindMode;
using ::stoker::pipeline::BoundPipeline;
using ::stoker::pipeline::InputField;
using ::stoker::pipeline::Pipeline;
using ::stoker::pipeline::testing::IsOk;

const std::vector<InputField> kImageLabelSchema = {
    InputField::Image("image"),
    InputField::Dense("label", tensor::DType::kInt64)};

BoundBoth MustBindBoth(const pipeline::PipelineConfig& config) {
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("p", config);
  EXPECT_THAT(pipeline, IsOk());
  if (!pipeline.ok()) return {};
  auto full = (*pipeline)->Bind(kImageLabelSchema);
  auto rendered = (*pipeline)->Bind(kImageLabelSchema, BindMode::kRendered);
  EXPECT_THAT(full, IsOk());
  EXPECT_THAT(rendered, IsOk());
  if (!full.ok() || !rendered.ok()) return {};
  return {*std::move(full), *std::move(rendered)};
}

absl::StatusOr<std::vector<std::string>> RunRecord(
    const BoundPipeline& bound, const std::string& image, int64_t label,
    pipeline::SampleRng& rng, pipeline::StageTimes* times) {
  std::vector<std::string> outputs;
  std::vector<uint8_t*> dst;
  for (const tensor::TensorSpec& spec : bound.outputs()) {
    outputs.emplace_back(spec.bytes(), '\0');
  }
  for (std::string& out : outputs) {
    dst.push_back(reinterpret_cast<uint8_t*>(out.data()));
  }
  const std::string label_bytes(reinterpret_cast<const char*>(&label), 8);
  const std::string_view fields[] = {image, label_bytes};
  if (absl::Status s = bound.Run(fields, rng, dst, times); !s.ok()) return s;
  return outputs;
}

std::vector<std::string> RunSample(const BoundPipeline& bound,
                                   const std::string& image, uint64_t id) {
  pipeline::SampleRng rng(/*seed=*/5, /*epoch=*/1, id);
  absl::StatusOr<std::vector<std::string>> outputs =
      RunRecord(bound, image, /*label=*/3, rng);
  EXPECT_THAT(outputs, IsOk());
  return outputs.ok() ? *std::move(outputs) : std::vector<std::string>{};
}

}  // namespace stoker::testing
