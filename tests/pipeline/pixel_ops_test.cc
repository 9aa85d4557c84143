// Tests of the pixel ops' random choices (ops_test.cc checks their
// arguments). Their pixels are held against torchvision by
// tests/python/test_op_parity.py.

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/kernels/color.h"
#include "server/pipeline/pipeline.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;

using Floats = std::vector<double>;

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

// Runs decode_image -> center_crop (the whole image) -> `ops` -> uint8
// output on `png` for sample `id`.
std::string RunOps(const std::vector<OpConfig>& ops, const std::string& png,
                   int width, int height, uint64_t id) {
  std::vector<OpConfig> all = {
      Op("decode_image"),
      Op("center_crop", {{"size", Floats{1.0 * height, 1.0 * width}}})};
  all.insert(all.end(), ops.begin(), ops.end());
  all.push_back(Op("normalize", {{"dtype", std::string("uint8")}}));
  auto pipeline = Pipeline::Create("p", all);
  EXPECT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind({InputField::Image("image")});
  EXPECT_THAT(bound, IsOk());
  std::string out((*bound)->outputs()[0].bytes(), '\0');
  uint8_t* dst[] = {reinterpret_cast<uint8_t*>(out.data())};
  const std::string_view fields[] = {png};
  SampleRng rng(3, 1, id);
  EXPECT_THAT((*bound)->Run(fields, rng, dst, nullptr), IsOk());
  return out;
}

TEST(ColorJitterOpTest, RunsTheFourAdjustmentsInAUniformlyRandomOrder) {
  constexpr int kWidth = 12, kHeight = 8;
  const std::string png =
      ::stoker::testing::MakePng(kWidth, kHeight,
                                 ::stoker::testing::PngColor::kRgb, 8, false, 4)
          .bytes;
  const std::string plain = RunOps({}, png, kWidth, kHeight, 0);
  // Every factor pinned, so only the order varies; the 24 orders give 24
  // different images here.
  const std::array<double, 4> factor = {1.5, 0.5, 0.2, 0.25};
  std::map<std::string, int> order_of;
  std::array<int, 4> order = {0, 1, 2, 3};
  int index = 0;
  do {
    std::string image = plain;
    const ImageBuffer buffer{reinterpret_cast<uint8_t*>(image.data()),
                             kWidth * 3, kWidth, kHeight, 3};
    for (int a : order) {
      switch (a) {
        case 0:
          kernels::AdjustBrightness(buffer, factor[0]);
          break;
        case 1:
          kernels::AdjustContrast(buffer, factor[1]);
          break;
        case 2:
          kernels::AdjustSaturation(buffer, factor[2]);
          break;
        default:
          kernels::AdjustHue(buffer, factor[3]);
          break;
      }
    }
    order_of[image] = index++;
  } while (std::next_permutation(order.begin(), order.end()));
  ASSERT_EQ(order_of.size(), 24u);

  const std::vector<OpConfig> jitter = {
      Op("color_jitter", {{"brightness", Floats{1.5, 1.5}},
                          {"contrast", Floats{0.5, 0.5}},
                          {"saturation", Floats{0.2, 0.2}},
                          {"hue", Floats{0.25, 0.25}}})};
  constexpr int kSamples = 2400;
  std::array<int, 24> counts{};
  for (uint64_t id = 0; id < kSamples; ++id) {
    const auto it = order_of.find(RunOps(jitter, png, kWidth, kHeight, id));
    ASSERT_NE(it, order_of.end()) << "sample " << id << " matches no order";
    ++counts[it->second];
  }
  // Chi-squared with 23 degrees of freedom; 49.73 is its 0.999 quantile.
  const double expected = kSamples / 24.0;
  double chi2 = 0;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 49.73);
}

TEST(PixelOpTest, AppliesWithProbabilityP) {
  // Large enough that equalize changes it (a channel of fewer than 256
  // pixels is kept, as torchvision keeps it).
  constexpr int kWidth = 32, kHeight = 24;
  const std::string png =
      ::stoker::testing::MakePng(kWidth, kHeight,
                                 ::stoker::testing::PngColor::kRgb, 8, false, 9)
          .bytes;
  const std::string plain = RunOps({}, png, kWidth, kHeight, 0);
  const std::vector<std::pair<std::string, OpArgs>> ops = {
      {"random_grayscale", {}},
      {"equalize", {}},
      {"solarize", {{"threshold", 128.0}}},
      {"posterize", {{"bits", int64_t{2}}}},
      {"adjust_sharpness", {{"sharpness_factor", 0.0}}},
      {"gaussian_blur", {{"kernel_size", int64_t{3}}}},
      {"color_jitter", {{"brightness", 0.5}}},
  };
  for (const auto& [name, args] : ops) {
    OpArgs sometimes = args, never = args;
    sometimes["p"] = 0.3;
    never["p"] = 0.0;
    int changed = 0;
    for (uint64_t id = 0; id < 500; ++id) {
      changed +=
          RunOps({Op(name, sometimes)}, png, kWidth, kHeight, id) != plain;
    }
    EXPECT_NEAR(changed, 150, 40) << name;
    EXPECT_EQ(RunOps({Op(name, never)}, png, kWidth, kHeight, 5), plain)
        << name;
  }
}

}  // namespace
}  // namespace stoker::pipeline
