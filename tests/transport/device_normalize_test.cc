// The device normalize's host reference (the kernel's arithmetic, run on
// the CPU) against the CPU pipeline: a batch rendered as uint8 HWC (the
// format ops left to the device) and normalized by the reference equals
// the same batch rendered by the normalize + layout ops. The kernel itself
// is checked against this reference on a GPU (device_normalize_gpu_test).
#include "server/transport/cuda_ipc/device_normalize.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::transport {
namespace {

using ::stoker::pipeline::InputField;
using ::stoker::pipeline::OpConfig;
using ::stoker::pipeline::testing::IsOk;
using Floats = std::vector<double>;

constexpr int kSize = 48;
constexpr uint32_t kSamples = 5;
const Floats kMean = {0.485, 0.456, 0.406};
const Floats kStd = {0.229, 0.224, 0.225};

// decode, crop, flip; then `dtype` and `layout`, or nothing (uint8 HWC,
// what the CPU renders for the device).
std::vector<OpConfig> Ops(const std::string& dtype, const std::string& layout) {
  std::vector<OpConfig> ops = {
      {"decode_image", {}, 0},
      {"random_resized_crop", {{"size", int64_t{kSize}}}, 0},
      {"random_flip", {}, 0},
  };
  if (dtype.empty()) return ops;
  if (dtype == "uint8") {
    ops.push_back({"normalize", {{"dtype", dtype}}, 0});
  } else {
    ops.push_back(
        {"normalize", {{"mean", kMean}, {"std", kStd}, {"dtype", dtype}}, 0});
  }
  ops.push_back({"layout", {{"value", layout}}, 0});
  return ops;
}

// The image outputs of kSamples samples, back to back, as the batch
// buffer holds them.
std::string RenderBatch(const std::vector<OpConfig>& ops) {
  auto pipeline = pipeline::Pipeline::Create("p", ops);
  EXPECT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind({InputField::Image("image")});
  EXPECT_THAT(bound, IsOk());
  const size_t bytes = (*bound)->outputs()[0].bytes();
  std::string batch(bytes * kSamples, '\0');
  for (uint32_t i = 0; i < kSamples; ++i) {
    const std::string jpeg = stoker::testing::MakeJpeg(120 + 13 * i, 90, i);
    const std::string_view fields[] = {jpeg};
    uint8_t* dst[] = {reinterpret_cast<uint8_t*>(batch.data()) + i * bytes};
    pipeline::SampleRng rng(11, 2, i);
    EXPECT_THAT((*bound)->Run(fields, rng, dst, nullptr), IsOk());
  }
  return batch;
}

NormalizePlan Plan(DeviceDType dtype, bool chw, bool normalized) {
  NormalizePlan plan;
  plan.dtype = dtype;
  plan.chw = chw;
  plan.height = kSize;
  plan.width = kSize;
  if (normalized) {
    for (int c = 0; c < 3; ++c) {
      plan.mean[c] = kMean[c];
      plan.std[c] = kStd[c];
    }
  }
  return plan;
}

std::string OnHost(const NormalizePlan& plan, const std::string& pixels) {
  std::string out(plan.output_bytes() * kSamples, '\0');
  NormalizeOnHost(plan, NormalizeTable(plan),
                  reinterpret_cast<const uint8_t*>(pixels.data()), kSamples,
                  reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

std::vector<float> AsFloats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<uint16_t> AsHalves(const std::string& bytes) {
  std::vector<uint16_t> v(bytes.size() / 2);
  std::memcpy(v.data(), bytes.data(), v.size() * 2);
  return v;
}

float BFloat16Value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

TEST(DeviceNormalizeTest, Float32EqualsTheCpuNormalizeAndLayoutOps) {
  const std::string pixels = RenderBatch(Ops("", ""));
  for (const char* layout : {"chw", "hwc"}) {
    const bool chw = std::string(layout) == "chw";
    const std::vector<float> cpu =
        AsFloats(RenderBatch(Ops("float32", layout)));
    const std::vector<float> ref =
        AsFloats(OnHost(Plan(DeviceDType::kFloat32, chw, true), pixels));
    ASSERT_EQ(ref.size(), cpu.size()) << layout;
    double max_abs = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(double{ref[i]} - cpu[i]));
    }
    EXPECT_LE(max_abs, 1e-6) << layout;
    // The same table as the CPU's: not close, equal.
    EXPECT_EQ(std::memcmp(ref.data(), cpu.data(), cpu.size() * 4), 0)
        << layout << ": max abs difference " << max_abs;
  }
}

TEST(DeviceNormalizeTest, Float16AndUint8EqualTheCpuOpsBitForBit) {
  const std::string pixels = RenderBatch(Ops("", ""));
  for (const char* layout : {"chw", "hwc"}) {
    const bool chw = std::string(layout) == "chw";
    EXPECT_TRUE(OnHost(Plan(DeviceDType::kFloat16, chw, true), pixels) ==
                RenderBatch(Ops("float16", layout)))
        << layout;
    EXPECT_TRUE(OnHost(Plan(DeviceDType::kUint8, chw, false), pixels) ==
                RenderBatch(Ops("uint8", layout)))
        << layout;
  }
}

TEST(DeviceNormalizeTest, BFloat16IsTheCpuFloat32RoundedToNearestEven) {
  const std::string pixels = RenderBatch(Ops("", ""));
  const std::vector<float> cpu = AsFloats(RenderBatch(Ops("float32", "chw")));
  const std::vector<uint16_t> ref =
      AsHalves(OnHost(Plan(DeviceDType::kBFloat16, true, true), pixels));
  ASSERT_EQ(ref.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(ref[i], FloatToBFloat16(cpu[i])) << "element " << i;
    // Within half a unit in the last place: 8 significant bits.
    ASSERT_LE(std::fabs(BFloat16Value(ref[i]) - cpu[i]),
              std::ldexp(std::fabs(cpu[i]), -8))
        << "element " << i;
  }
}

TEST(FloatToBFloat16Test, RoundsToNearestTiesToEven) {
  auto bits = [](float f) { return FloatToBFloat16(f); };
  EXPECT_EQ(bits(1.0f), 0x3f80);
  EXPECT_EQ(bits(-2.0f), 0xc000);
  // Halfway between 1 and the next bfloat16 (1 + 2^-7): down to the even 1.
  EXPECT_EQ(bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // Halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even one.
  EXPECT_EQ(bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above halfway: up.
  EXPECT_EQ(bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(bits(0.0f), 0x0000);
  EXPECT_EQ(bits(-0.0f), 0x8000);
}

TEST(FloatToBFloat16Test, OverflowIsInfinityAndNanStaysQuietNan) {
  EXPECT_EQ(FloatToBFloat16(3.4028235e38f), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-INFINITY), 0xff80);
  uint32_t signalling =
      0x7f800001u;  // A NaN whose payload rounding would lose.
  float nan;
  std::memcpy(&nan, &signalling, 4);
  EXPECT_EQ(FloatToBFloat16(nan), 0x7fc0);
  EXPECT_EQ(FloatToBFloat16(-NAN) & 0xffc0, 0xffc0);
}

TEST(NormalizePlanTest, SizesFollowTheDtype) {
  NormalizePlan plan = Plan(DeviceDType::kBFloat16, true, true);
  EXPECT_EQ(plan.input_bytes(), size_t{kSize} * kSize * 3);
  EXPECT_EQ(plan.output_bytes(), size_t{kSize} * kSize * 3 * 2);
  plan.dtype = DeviceDType::kFloat32;
  EXPECT_EQ(plan.output_bytes(), size_t{kSize} * kSize * 3 * 4);
  EXPECT_EQ(DeviceDTypeName(DeviceDType::kBFloat16), "bfloat16");
}

}  // namespace
}  // namespace stoker::transport
