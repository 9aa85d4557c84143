// A pipeline bound kRendered (what a node asks its helpers for) and
// finished by the full bind's FormatRendered and RunBatch gives the bytes
// the full bind gives, for every format, layout, view and flip
// (docs/remote-design.md §1.2).
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/pipeline_runs.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::BoundBoth;
using ::stoker::testing::kImageLabelSchema;
using ::stoker::testing::MakeJpeg;
using ::stoker::testing::MustBindBoth;
using ::stoker::testing::RunSample;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

std::vector<OpConfig> Train(std::string dtype, std::string layout) {
  return {Op("decode_jpeg"),
          Op("random_resized_crop", {{"size", int64_t{40}}}),
          Op("random_flip"),
          Op("color_jitter", {{"brightness", Floats{0.6, 1.4}}}),
          Op("normalize", {{"mean", Floats{0.485, 0.456, 0.406}},
                           {"std", Floats{0.229, 0.224, 0.225}},
                           {"dtype", dtype}}),
          Op("layout", {{"value", layout}})};
}

// The full bind's outputs from the rendered bind's run of the same sample.
std::vector<std::string> Finish(const BoundPipeline& full,
                                const std::vector<std::string>& rendered) {
  std::vector<std::string> outputs;
  for (size_t i = 0; i < full.outputs().size(); ++i) {
    if (i >= full.num_image_outputs()) {
      outputs.push_back(rendered[i]);
      continue;
    }
    std::string out(full.outputs()[i].bytes(), '\0');
    full.FormatRendered(i,
                        reinterpret_cast<const uint8_t*>(rendered[i].data()),
                        reinterpret_cast<uint8_t*>(out.data()));
    outputs.push_back(std::move(out));
  }
  return outputs;
}

void ExpectFinishedEqualsFull(const PipelineConfig& config) {
  BoundBoth b = MustBindBoth(config);
  ASSERT_NE(b.full, nullptr);
  EXPECT_TRUE(b.full->can_finish_rendered());
  const std::string image = MakeJpeg(96, 72, 9);
  // Enough samples that random_flip goes both ways.
  for (uint64_t id = 0; id < 12; ++id) {
    const std::vector<std::string> full = RunSample(*b.full, image, id);
    const std::vector<std::string> rendered =
        RunSample(*b.rendered, image, id);
    const std::vector<std::string> finished = Finish(*b.full, rendered);
    ASSERT_EQ(finished.size(), full.size());
    for (size_t i = 0; i < full.size(); ++i) {
      EXPECT_TRUE(finished[i] == full[i])
          << "sample " << id << " output " << b.full->outputs()[i].name;
    }
  }
}

TEST(RenderedBindTest, RendersEveryImageAsUint8HwcAndKeepsTheOtherOutputs) {
  BoundBoth b = MustBindBoth({Train("float32", "chw"), {}});
  ASSERT_NE(b.rendered, nullptr);
  const auto& out = b.rendered->outputs();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "image");
  EXPECT_EQ(out[0].dtype, tensor::DType::kUint8);
  EXPECT_THAT(out[0].shape, ElementsAre(40, 40, 3));
  EXPECT_EQ(out[1].name, "label");
  EXPECT_EQ(b.full->outputs()[0].dtype, tensor::DType::kFloat32);
  EXPECT_THAT(b.full->outputs()[0].shape, ElementsAre(3, 40, 40));
  EXPECT_EQ(b.full->num_image_outputs(), 1u);
  // The full bind knows the rendered bind's slots.
  const std::vector<tensor::OutputSlot> slots = b.full->RenderedSlots();
  ASSERT_EQ(slots.size(), b.rendered->slots().size());
  for (size_t i = 0; i < slots.size(); ++i) {
    EXPECT_EQ(slots[i].spec.name, b.rendered->slots()[i].spec.name);
    EXPECT_EQ(slots[i].spec.dtype, b.rendered->slots()[i].spec.dtype);
    EXPECT_EQ(slots[i].spec.shape, b.rendered->slots()[i].spec.shape);
    EXPECT_EQ(slots[i].max_sample_bytes, b.rendered->slots()[i].max_sample_bytes);
  }
}

TEST(RenderedBindTest, Float32ChwFinishedHereEqualsTheFullRun) {
  ExpectFinishedEqualsFull({Train("float32", "chw"), {}});
}

TEST(RenderedBindTest, Float16HwcFinishedHereEqualsTheFullRun) {
  ExpectFinishedEqualsFull({Train("float16", "hwc"), {}});
}

TEST(RenderedBindTest, Uint8OutputsAreTheRenderingItself) {
  ExpectFinishedEqualsFull({{Op("decode_jpeg"),
                             Op("random_resized_crop", {{"size", int64_t{32}}}),
                             Op("random_flip")},
                            {}});
}

TEST(RenderedBindTest, EveryViewInstanceFinishedHereEqualsTheFullRun) {
  std::vector<OpConfig> local = {
      Op("random_resized_crop", {{"size", int64_t{16}}}), Op("random_flip"),
      Op("layout", {{"value", std::string("chw")}})};
  std::vector<OpConfig> global = Train("float32", "chw");
  global.erase(global.begin());  // Views hold no decode op.
  ExpectFinishedEqualsFull(
      {{Op("decode_image")}, {{"global", 2, global, 0}, {"local", 3, local, 0}}});
}

TEST(RenderedBindTest, ABatchOpRunsOnlyWhereTheRenderingIsFinished) {
  std::vector<OpConfig> ops = Train("float32", "chw");
  ops.push_back(Op("mixup", {{"alpha", 0.2}, {"num_classes", int64_t{10}}}));
  BoundBoth b = MustBindBoth({ops, {}});
  ASSERT_NE(b.full, nullptr);
  EXPECT_TRUE(b.full->has_batch_op());
  EXPECT_FALSE(b.rendered->has_batch_op());
  // The soft labels are per sample: the rendered bind writes them too.
  ExpectFinishedEqualsFull({ops, {}});
}

TEST(RenderedBindTest, ATensorOpRefusesTheRenderedBind) {
  std::vector<OpConfig> ops = Train("float32", "chw");
  ops.push_back(Op("random_erasing", {{"p", 1.0}}));
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("erase", PipelineConfig{ops, {}});
  ASSERT_THAT(pipeline, IsOk());
  auto full = (*pipeline)->Bind(kImageLabelSchema);
  ASSERT_THAT(full, IsOk());
  EXPECT_FALSE((*full)->can_finish_rendered());
  EXPECT_THAT((*pipeline)->Bind(kImageLabelSchema, BindMode::kRendered),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pipeline 'erase' has the tensor op "
                                 "random_erasing")));
}

}  // namespace
}  // namespace stoker::pipeline
