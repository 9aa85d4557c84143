// Pipelines with views (docs/pipeline-design.md §4.4): output names and
// shapes, each instance equal to a single-view run with its own generator,
// instances independent of each other, and the refusals.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"
#include "tests/testing/pipeline_runs.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::EncodeRgbPng;
using ::stoker::testing::MakeJpeg;
using ::stoker::testing::MakePixels;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

constexpr uint64_t kSeed = 77, kEpoch = 2, kId = 31;

OpConfig Op(std::string name, OpArgs args = {}, int line = 0) {
  return {std::move(name), std::move(args), line};
}

// DINO-like: a global view of two float32 CHW instances, one local view of
// three uint8 HWC instances, each with its own crop, flip and colour ops.
std::vector<OpConfig> GlobalOps() {
  return {Op("random_resized_crop",
             {{"size", int64_t{48}}, {"scale", Floats{0.4, 1.0}}}),
          Op("random_flip"),
          Op("color_jitter", {{"brightness", Floats{0.6, 1.4}}}),
          Op("normalize", {{"mean", Floats{0.485, 0.456, 0.406}},
                           {"std", Floats{0.229, 0.224, 0.225}}}),
          Op("layout", {{"value", std::string("chw")}})};
}
std::vector<OpConfig> LocalOps() {
  return {Op("random_resized_crop",
             {{"size", int64_t{24}}, {"scale", Floats{0.05, 0.4}}}),
          Op("random_flip"),
          Op("solarize", {{"p", 0.5}, {"threshold", 128.0}})};
}

PipelineConfig Dino() {
  return {{Op("decode_image")},
          {{"global", 2, GlobalOps(), 0}, {"local", 3, LocalOps(), 0}}};
}

const std::vector<InputField> kSchema = {
    InputField::Image("image"),
    InputField::Dense("label", tensor::DType::kInt64)};

std::unique_ptr<BoundPipeline> MustBind(const PipelineConfig& config) {
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("p", config);
  EXPECT_THAT(pipeline, IsOk());
  if (!pipeline.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<BoundPipeline>> bound =
      (*pipeline)->Bind(kSchema);
  EXPECT_THAT(bound, IsOk());
  return bound.ok() ? *std::move(bound) : nullptr;
}

// Runs `bound` on one (image, label 5) record with generator `rng`.
std::vector<std::string> RunOnce(const BoundPipeline& bound,
                                 const std::string& image, SampleRng& rng) {
  absl::StatusOr<std::vector<std::string>> outputs =
      ::stoker::testing::RunRecord(bound, image, 5, rng);
  EXPECT_THAT(outputs, IsOk());
  return outputs.ok() ? *std::move(outputs) : std::vector<std::string>{};
}

std::string Png(int width, int height, uint32_t seed) {
  return EncodeRgbPng(width, height, MakePixels(width, height, seed));
}

TEST(ViewsTest, NamesAndShapesEveryInstanceAndPassesFieldsThroughOnce) {
  std::unique_ptr<BoundPipeline> bound = MustBind(Dino());
  ASSERT_NE(bound, nullptr);
  std::vector<std::string> names;
  for (const tensor::TensorSpec& spec : bound->outputs()) {
    names.push_back(spec.name);
  }
  EXPECT_THAT(names,
              ElementsAre("global.0.image", "global.1.image", "local.0.image",
                          "local.1.image", "local.2.image", "label"));
  const auto& out = bound->outputs();
  EXPECT_EQ(out[0].dtype, tensor::DType::kFloat32);
  EXPECT_THAT(out[0].shape, ElementsAre(3, 48, 48));
  EXPECT_EQ(out[2].dtype, tensor::DType::kUint8);
  EXPECT_THAT(out[2].shape, ElementsAre(24, 24, 3));
  EXPECT_THAT(out[5].shape, ElementsAre());

  auto pipeline = Pipeline::Create("p", Dino());
  ASSERT_THAT(pipeline, IsOk());
  const std::vector<std::string> ops = (*pipeline)->op_names();
  ASSERT_EQ(ops.size(), 9u);
  EXPECT_EQ(ops[0], "decode_image");
  EXPECT_EQ(ops[1], "global.random_resized_crop");
  EXPECT_EQ(ops[8], "local.solarize");
}

TEST(ViewsTest, AViewOfOneInstanceIsNamedWithoutAnIndex) {
  PipelineConfig config = Dino();
  config.views[0].count = 1;
  std::unique_ptr<BoundPipeline> bound = MustBind(config);
  ASSERT_NE(bound, nullptr);
  EXPECT_EQ(bound->outputs()[0].name, "global.image");
  EXPECT_EQ(bound->outputs()[1].name, "local.0.image");
}

// Instance g of a view is the view's ops run alone with the generator of
// instance g: for a PNG (decoded at full size whatever the views need)
// byte for byte, although it was decoded once for all five instances.
TEST(ViewsTest, EachInstanceEqualsTheViewAloneWithItsGenerator) {
  std::unique_ptr<BoundPipeline> views = MustBind(Dino());
  ASSERT_NE(views, nullptr);
  std::vector<OpConfig> global = {Op("decode_image")};
  std::vector<OpConfig> local = global;
  for (OpConfig& op : GlobalOps()) global.push_back(op);
  for (OpConfig& op : LocalOps()) local.push_back(op);
  std::unique_ptr<BoundPipeline> global_alone = MustBind({global, {}});
  std::unique_ptr<BoundPipeline> local_alone = MustBind({local, {}});
  ASSERT_NE(global_alone, nullptr);
  ASSERT_NE(local_alone, nullptr);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::string image = Png(160 + 7 * seed, 120, seed);
    SampleRng rng(kSeed, kEpoch, kId + seed);
    const std::vector<std::string> all = RunOnce(*views, image, rng);
    for (uint32_t g = 0; g < 5; ++g) {
      SampleRng base(kSeed, kEpoch, kId + seed);
      SampleRng alone_rng(base, g);
      const std::vector<std::string> alone =
          RunOnce(g < 2 ? *global_alone : *local_alone, image, alone_rng);
      EXPECT_EQ(all[g], alone[0]) << "instance " << g << ", image " << seed;
    }
    EXPECT_EQ(all[5], std::string("\x05\0\0\0\0\0\0\0", 8));
  }
}

// Through a JPEG an instance whose own plan has the largest scale any
// instance needs is the view alone byte for byte. One that alone would
// decode at a smaller DCT scale is box-averaged from the larger one
// instead: a different low-pass, and edges placed to the nearest pixel of
// the finer scale rather than the coarser one (image_plan.h), so it
// differs at edges by up to half a coarse pixel.
TEST(ViewsTest, JpegInstancesAreCloseToTheViewAlone) {
  // Without solarize, which turns a small difference near its threshold
  // into a large one.
  PipelineConfig config = Dino();
  config.views[1].ops.pop_back();
  std::unique_ptr<BoundPipeline> views = MustBind(config);
  ASSERT_NE(views, nullptr);
  std::vector<OpConfig> local = {Op("decode_image")};
  for (OpConfig& op : config.views[1].ops) local.push_back(op);
  std::unique_ptr<BoundPipeline> local_alone = MustBind({local, {}});
  ASSERT_NE(local_alone, nullptr);
  double worst = 0;
  int equal = 0, compared = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const std::string image = MakeJpeg(320, 240, seed);
    SampleRng rng(kSeed, kEpoch, kId + seed);
    const std::vector<std::string> all = RunOnce(*views, image, rng);
    for (uint32_t g = 2; g < 5; ++g) {
      SampleRng base(kSeed, kEpoch, kId + seed);
      SampleRng alone_rng(base, g);
      const std::string alone = RunOnce(*local_alone, image, alone_rng)[0];
      double sum = 0;
      for (size_t i = 0; i < alone.size(); ++i) {
        sum += std::abs(static_cast<uint8_t>(all[g][i]) -
                        static_cast<uint8_t>(alone[i]));
      }
      worst = std::max(worst, sum / alone.size());
      equal += all[g] == alone;
      ++compared;
    }
  }
  // Measured: 8 of 24 equal, the worst mean 4.95 levels (24x24 crops of a
  // picture with sharp shapes; a misplaced window would be far off).
  std::printf("%d of %d equal; worst mean absolute difference %.2f\n", equal,
              compared, worst);
  EXPECT_GE(equal, compared / 4);
  EXPECT_LT(worst, 8.0);
}

TEST(ViewsTest, InstancesDrawIndependentCrops) {
  std::unique_ptr<BoundPipeline> bound = MustBind(Dino());
  ASSERT_NE(bound, nullptr);
  const std::string image = Png(200, 150, 9);
  SampleRng rng(kSeed, kEpoch, kId);
  const std::vector<std::string> all = RunOnce(*bound, image, rng);
  for (int a = 0; a < 5; ++a) {
    for (int b = a + 1; b < 5; ++b) {
      if (all[a].size() == all[b].size()) {
        EXPECT_NE(all[a], all[b]) << a << " " << b;
      }
    }
  }
  // The same sample again gives the same instances.
  SampleRng again(kSeed, kEpoch, kId);
  EXPECT_EQ(RunOnce(*bound, image, again), all);
}

TEST(ViewsTest, ASpatialMaskFollowsEachInstance) {
  PipelineConfig config = Dino();
  config.ops.push_back(
      Op("decode_image", {{"field", std::string("mask")},
                          {"interpolation", std::string("nearest")}}));
  auto pipeline = Pipeline::Create("p", config);
  ASSERT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind(
      {InputField::Image("image"), InputField::Image("mask")});
  ASSERT_THAT(bound, IsOk());
  std::vector<std::string> names;
  for (const tensor::TensorSpec& spec : (*bound)->outputs()) {
    names.push_back(spec.name);
  }
  EXPECT_THAT(names,
              ElementsAre("global.0.image", "global.0.mask", "global.1.image",
                          "global.1.mask", "local.0.image", "local.0.mask",
                          "local.1.image", "local.1.mask", "local.2.image",
                          "local.2.mask"));
  EXPECT_EQ((*bound)->outputs()[1].dtype, tensor::DType::kUint8);
  EXPECT_THAT((*bound)->outputs()[1].shape, ElementsAre(3, 48, 48));
}

TEST(ViewsTest, RefusesOpsInTheWrongListAndBadViews) {
  const auto create = [](PipelineConfig config) {
    return Pipeline::Create("p", config).status();
  };
  PipelineConfig geometry_in_decode = Dino();
  geometry_in_decode.ops.push_back(Op("random_flip"));
  EXPECT_THAT(create(geometry_in_decode),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("in its decode list; put the others under "
                                 "a view")));
  PipelineConfig decode_in_view = Dino();
  decode_in_view.views[1].ops.insert(decode_in_view.views[1].ops.begin(),
                                     Op("drop_fields"));
  absl::Status status = create(decode_in_view);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("view 'local': op[0] 'drop_fields'")));
  // Indices count the decode list, then each view's ops.
  EXPECT_EQ(FailedOpIndex(status), 1u + GlobalOps().size());

  PipelineConfig batch_in_view = Dino();
  batch_in_view.views[0].ops.push_back(
      Op("mixup", {{"alpha", 0.2}, {"num_classes", int64_t{10}}}));
  EXPECT_THAT(create(batch_in_view),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("need a pipeline without views")));

  PipelineConfig unsized = Dino();
  unsized.views[1].ops = {Op("random_flip")};
  EXPECT_THAT(create(unsized),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pipeline 'p', view 'local': the output "
                                 "size is not fixed")));

  for (const std::string& name : {std::string("a.b"), std::string("")}) {
    PipelineConfig bad = Dino();
    bad.views[0].name = name;
    EXPECT_THAT(create(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("a view's name takes")));
  }
  PipelineConfig twice = Dino();
  twice.views[1].name = "global";
  EXPECT_THAT(create(twice), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("a view of that name")));
  for (int count : {0, kMaxViewCount + 1}) {
    PipelineConfig bad = Dino();
    bad.views[1].count = count;
    EXPECT_THAT(create(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("is outside 1..64")));
  }
}

TEST(ViewsTest, AnEmptyDecodeListDecodesTheImage) {
  PipelineConfig config = Dino();
  config.ops.clear();
  auto pipeline = Pipeline::Create("p", config);
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_EQ((*pipeline)->op_names()[0], "decode_image");
}

}  // namespace
}  // namespace stoker::pipeline
