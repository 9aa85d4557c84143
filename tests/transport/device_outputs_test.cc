// What a cuda_ipc stream's GPU does to each rendered tensor
// (device_outputs.h), checked without a GPU: the plan's host reference
// (NormalizeOnHost with the probed table) turns a sample the pipeline
// rendered on the CPU into the very bytes the pipeline bound in full
// writes, for every dtype and layout; what the device cannot do is refused.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "server/service/batch.h"
#include "server/transport/cuda_ipc/device_outputs.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/pipeline_runs.h"
#include "tests/testing/images.h"

namespace stoker::transport {
namespace {

using ::stoker::pipeline::OpArgs;
using ::stoker::pipeline::OpConfig;
using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::stoker::testing::BoundBoth;
using ::stoker::testing::MustBindBoth;
using ::stoker::testing::RunSample;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}


std::vector<OpConfig> Train(int64_t size, std::vector<OpConfig> format) {
  std::vector<OpConfig> ops = {
      Op("decode_jpeg"), Op("random_resized_crop", {{"size", size}}),
      Op("random_flip"),
      Op("color_jitter", {{"brightness", Floats{0.6, 1.4}}})};
  for (OpConfig& op : format) ops.push_back(std::move(op));
  return ops;
}

OpConfig Normalize(std::string dtype) {
  return Op("normalize", {{"mean", Floats{0.485, 0.456, 0.406}},
                          {"std", Floats{0.229, 0.224, 0.225}},
                          {"dtype", std::move(dtype)}});
}

OpConfig Layout(std::string value) {
  return Op("layout", {{"value", std::move(value)}});
}

// Checks that the device plan turns what the rendered bind writes into
// what the full bind writes, on several samples.
void ExpectDeviceEqualsCpu(const std::vector<OpConfig>& ops,
                           bool image_normalized) {
  BoundBoth b = MustBindBoth({ops, {}});
  ASSERT_NE(b.full, nullptr);
  absl::StatusOr<std::vector<DeviceOutput>> plan =
      PlanDeviceOutputs(*b.full, b.rendered->outputs());
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].normalize.has_value(), image_normalized);
  EXPECT_FALSE((*plan)[1].normalize.has_value());  // The label: a copy.
  EXPECT_EQ((*plan)[0].spec.shape, b.full->outputs()[0].shape);
  EXPECT_EQ((*plan)[0].spec.dtype, b.full->outputs()[0].dtype);
  for (uint64_t id = 0; id < 4; ++id) {
    const std::string jpeg = stoker::testing::MakeJpeg(70, 50, id);
    const std::vector<std::string> rendered =
        RunSample(*b.rendered, jpeg, id);
    const std::vector<std::string> full = RunSample(*b.full, jpeg, id);
    std::string device(full[0].size(), '\0');
    if ((*plan)[0].normalize.has_value()) {
      NormalizeOnHost(*(*plan)[0].normalize, *(*plan)[0].table,
                      reinterpret_cast<const uint8_t*>(rendered[0].data()), 1,
                      reinterpret_cast<uint8_t*>(device.data()));
    } else {
      device = rendered[0];
    }
    EXPECT_TRUE(device == full[0]) << "sample " << id;
    EXPECT_EQ(rendered[1], full[1]);
  }
}

TEST(DeviceOutputsTest, Float32ChwIsTheCpusBitForBit) {
  ExpectDeviceEqualsCpu(Train(40, {Normalize("float32"), Layout("chw")}),
                        true);
}

TEST(DeviceOutputsTest, Float16HwcIsTheCpusBitForBit) {
  ExpectDeviceEqualsCpu(Train(40, {Normalize("float16"), Layout("hwc")}),
                        true);
}

TEST(DeviceOutputsTest, Uint8ChwIsALayoutChangeOnTheDevice) {
  ExpectDeviceEqualsCpu(Train(40, {Layout("chw")}), true);
}

TEST(DeviceOutputsTest, Uint8HwcIsCopiedAsItIs) {
  ExpectDeviceEqualsCpu(Train(40, {}), false);
}

TEST(DeviceOutputsTest, ImagesOfFewerPixelsThanByteValuesAreProbedInRounds) {
  // 8 x 8 = 64 pixels: four probe images cover the 256 values.
  ExpectDeviceEqualsCpu(Train(8, {Normalize("float32"), Layout("chw")}),
                        true);
}

TEST(DeviceOutputsTest, ABatchOpIsRefusedNamingIt) {
  std::vector<OpConfig> ops =
      Train(16, {Normalize("float32"), Layout("chw")});
  ops.push_back(Op("mixup", {{"alpha", 0.2}, {"num_classes", int64_t{10}}}));
  BoundBoth b = MustBindBoth({ops, {}});
  ASSERT_NE(b.full, nullptr);
  EXPECT_THAT(PlanDeviceOutputs(*b.full, b.rendered->outputs()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("batch op")));
}

TEST(DeviceOutputsTest, ATensorTheCpuRendersDifferentlyIsRefused) {
  BoundBoth b = MustBindBoth({Train(16, {Normalize("float32"), Layout("chw")}), {}});
  ASSERT_NE(b.full, nullptr);
  std::vector<tensor::TensorSpec> rendered = b.rendered->outputs();
  rendered[1].dtype = tensor::DType::kInt32;  // The label, not an image.
  EXPECT_THAT(PlanDeviceOutputs(*b.full, rendered),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("output 1 'label'")));
}

TEST(DeviceOutputsTest, ASlotHoldsTheFormattedBatch) {
  BoundBoth b = MustBindBoth({Train(16, {Normalize("float32"), Layout("chw")}), {}});
  ASSERT_NE(b.full, nullptr);
  // 4 images of 3x16x16 float32, then 4 int64 labels at a 64-aligned
  // offset.
  EXPECT_EQ(DeviceSlotBytes(*b.full, 4),
            service::BatchLayout::AlignUp(4 * 3 * 16 * 16 * 4) +
                4 * 8);
}

}  // namespace
}  // namespace stoker::transport
