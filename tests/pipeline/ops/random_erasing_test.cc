// Tests of random_erasing: its arguments, where Create refuses it, the box
// it fills in each dtype and layout, and its random draws.
// tests/python/test_random_erasing.py holds the box distribution against
// torchvision's RandomErasing.get_params.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/registry.h"
#include "server/tensor/float16.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/images.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Floats = std::vector<double>;

constexpr int kW = 20, kH = 14;

OpConfig Op(std::string name, OpArgs args = {}) {
  return {std::move(name), std::move(args), 0};
}

std::vector<OpConfig> Ops(OpArgs normalize, std::vector<OpConfig> after) {
  std::vector<OpConfig> all = {
      Op("decode_image"),
      Op("center_crop", {{"size", Floats{1.0 * kH, 1.0 * kW}}}),
      Op("normalize", std::move(normalize))};
  all.insert(all.end(), after.begin(), after.end());
  return all;
}

// Runs `ops` on a test PNG for sample `id`; the output's bytes.
std::string RunOps(const std::vector<OpConfig>& ops, uint64_t id) {
  static const std::string* png = new std::string(
      ::stoker::testing::MakePng(kW, kH, ::stoker::testing::PngColor::kRgb, 8,
                                 false, 2)
          .bytes);
  auto pipeline = Pipeline::Create("p", ops);
  EXPECT_THAT(pipeline, IsOk());
  auto bound = (*pipeline)->Bind({InputField::Image("image")});
  EXPECT_THAT(bound, IsOk());
  std::string out((*bound)->outputs()[0].bytes(), '\0');
  uint8_t* dst[] = {reinterpret_cast<uint8_t*>(out.data())};
  const std::string_view fields[] = {*png};
  SampleRng rng(5, 3, id);
  EXPECT_THAT((*bound)->Run(fields, rng, dst, nullptr), IsOk());
  return out;
}

const OpArgs kFloat32Chw = {{"mean", Floats{0, 0, 0}},
                            {"std", Floats{1, 1, 1}}};

// The bounding box of the elements (of `element` bytes) that differ
// between `a` and `b` in a CHW or HWC image; {-1} when none does, and
// whether every element inside it differs.
struct Box {
  int top = -1, left = -1, h = 0, w = 0;
  bool solid = true;
};
Box Changed(const std::string& a, const std::string& b, size_t element,
            bool chw) {
  std::vector<bool> changed(kW * kH, false);
  for (size_t i = 0; i < a.size() / element; ++i) {
    if (std::memcmp(&a[i * element], &b[i * element], element) == 0) continue;
    const size_t pixel = chw ? i % (kW * kH) : i / 3;
    changed[pixel] = true;
  }
  Box box;
  int y0 = kH, y1 = -1, x0 = kW, x1 = -1;
  for (int p = 0; p < kW * kH; ++p) {
    if (!changed[p]) continue;
    y0 = std::min(y0, p / kW), y1 = std::max(y1, p / kW);
    x0 = std::min(x0, p % kW), x1 = std::max(x1, p % kW);
  }
  if (y1 < 0) return box;
  box = {y0, x0, y1 - y0 + 1, x1 - x0 + 1, true};
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) box.solid &= changed[y * kW + x];
  }
  return box;
}

absl::StatusOr<AnyOp> MakeOp(const std::string& name, const OpArgs& given) {
  const OpDef* def = OpRegistry::Global().Find(name);
  absl::StatusOr<OpArgs> args = ResolveArgs(*def, given);
  if (!args.ok()) return args.status();
  return def->factory(*args);
}

TEST(RandomErasingTest, RejectsBadValuesByName) {
  for (const auto& [args, arg] : std::vector<std::pair<OpArgs, std::string>>{
           {{{"scale", Floats{0.5, 0.1}}}, "scale"},
           {{{"scale", Floats{0.1, 1.5}}}, "scale"},
           {{{"ratio", Floats{0, 1}}}, "ratio"},
           {{{"ratio", Floats{1}}}, "ratio"},
           {{{"value", Floats{1, 2}}}, "value"},
           {{{"mean", Floats{0.5, 0.5}}}, "mean"},
           {{{"std", Floats{0}}}, "std"},
           {{{"p", 2.0}}, "p"}}) {
    EXPECT_THAT(MakeOp("random_erasing", args),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("'random_erasing'"),
                               HasSubstr("'" + arg + "'"))))
        << arg;
  }
}

TEST(RandomErasingTest, CreateRefusesRandomOnUint8AndLevelsOnFloat) {
  EXPECT_THAT(
      Pipeline::Create("p", Ops({{"dtype", std::string("uint8")}},
                                {Op("random_erasing", {{"random", true}})})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("random: true needs a float output")));
  EXPECT_THAT(Pipeline::Create(
                  "p", Ops(kFloat32Chw,
                           {Op("random_erasing", {{"mean", Floats{0.5}}})})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("mean and std are for uint8 outputs")));
  // And before normalize it is out of order.
  EXPECT_THAT(
      Pipeline::Create("p", {Op("decode_image"), Op("random_erasing"),
                             Op("normalize", kFloat32Chw)}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of order")));
}

TEST(RandomErasingTest, FillsOneRectangleInEachDtypeAndLayout) {
  const OpArgs erase = {
      {"p", 1.0}, {"scale", Floats{0.1, 0.3}}, {"value", Floats{7, -3, 0.5}}};
  struct Case {
    const char* what;
    std::vector<OpConfig> plain, erased;
    size_t element;
    bool chw;
  };
  const OpArgs f16 = {{"mean", Floats{0, 0, 0}},
                      {"std", Floats{1, 1, 1}},
                      {"dtype", std::string("float16")}};
  OpArgs u8_erase = erase;
  u8_erase["value"] = Floats{0};
  u8_erase["mean"] = Floats{0.485, 0.456, 0.406};
  u8_erase["std"] = Floats{0.229, 0.224, 0.225};
  const std::vector<Case> cases = {
      {"float32 chw",
       Ops(kFloat32Chw, {Op("layout", {{"value", std::string("chw")}})}),
       Ops(kFloat32Chw, {Op("layout", {{"value", std::string("chw")}}),
                         Op("random_erasing", erase)}),
       4, true},
      {"float16 hwc", Ops(f16, {}), Ops(f16, {Op("random_erasing", erase)}), 2,
       false},
      {"uint8 hwc", Ops({{"dtype", std::string("uint8")}}, {}),
       Ops({{"dtype", std::string("uint8")}}, {Op("random_erasing", u8_erase)}),
       1, false},
  };
  for (const Case& c : cases) {
    for (uint64_t id = 0; id < 20; ++id) {
      const std::string plain = RunOps(c.plain, id);
      const std::string erased = RunOps(c.erased, id);
      const Box box = Changed(plain, erased, c.element, c.chw);
      ASSERT_GE(box.top, 0) << c.what << " sample " << id;
      EXPECT_TRUE(box.solid) << c.what;
      // Area within scale (h and w are rounded, so allow a row and column).
      EXPECT_LE(box.h * box.w, 0.3 * kW * kH + box.h + box.w + 1) << c.what;
      EXPECT_GE((box.h + 1) * (box.w + 1), 0.1 * kW * kH) << c.what;
      EXPECT_LT(box.h, kH);
      EXPECT_LT(box.w, kW);
      // The values, by channel, at the box's top-left element.
      for (int ch = 0; ch < 3; ++ch) {
        const size_t index =
            c.chw ? (static_cast<size_t>(ch) * kH + box.top) * kW + box.left
                  : (static_cast<size_t>(box.top) * kW + box.left) * 3 + ch;
        if (c.element == 4) {
          float v;
          std::memcpy(&v, &erased[index * 4], 4);
          EXPECT_EQ(v, static_cast<float>(Floats{7, -3, 0.5}[ch]));
        } else if (c.element == 2) {
          uint16_t v;
          std::memcpy(&v, &erased[index * 2], 2);
          EXPECT_EQ(v, tensor::FloatToHalf(
                           static_cast<float>(Floats{7, -3, 0.5}[ch])));
        } else {
          // round(255 * mean): 124, 116, 104.
          EXPECT_EQ(static_cast<uint8_t>(erased[index]),
                    (std::array<int, 3>{124, 116, 104}[ch]));
        }
      }
    }
  }
}

TEST(RandomErasingTest, RandomFillIsStandardNormalAndPIsTheRate) {
  const std::vector<OpConfig> plain_ops =
      Ops(kFloat32Chw, {Op("layout", {{"value", std::string("chw")}})});
  const std::vector<OpConfig> random_ops =
      Ops(kFloat32Chw,
          {Op("layout", {{"value", std::string("chw")}}),
           Op("random_erasing",
              {{"p", 1.0}, {"scale", Floats{0.2, 0.3}}, {"random", true}})});
  double sum = 0, squares = 0;
  int n = 0;
  for (uint64_t id = 0; id < 40; ++id) {
    const std::string plain = RunOps(plain_ops, id);
    const std::string erased = RunOps(random_ops, id);
    for (size_t i = 0; i < plain.size() / 4; ++i) {
      if (std::memcmp(&plain[i * 4], &erased[i * 4], 4) == 0) continue;
      float v;
      std::memcpy(&v, &erased[i * 4], 4);
      sum += v, squares += v * v, ++n;
    }
  }
  ASSERT_GT(n, 2000);
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0, 0.06);
  EXPECT_NEAR(std::sqrt(squares / n - mean * mean), 1, 0.06);

  // A ratio far beyond any image never fits, and never overflows.
  const std::vector<OpConfig> extreme = Ops(
      kFloat32Chw,
      {Op("random_erasing", {{"p", 1.0}, {"ratio", Floats{1e300, 1e300}}})});
  EXPECT_EQ(RunOps(extreme, 1), RunOps(Ops(kFloat32Chw, {}), 1));

  const std::vector<OpConfig> sometimes = Ops(
      kFloat32Chw, {Op("random_erasing", {{"p", 0.3}, {"value", Floats{9}}})});
  const std::vector<OpConfig> never = Ops(kFloat32Chw, {});
  int erased = 0;
  for (uint64_t id = 0; id < 400; ++id) {
    erased += RunOps(sometimes, id) != RunOps(never, id);
  }
  EXPECT_NEAR(erased, 120, 30);
}

}  // namespace
}  // namespace stoker::pipeline
