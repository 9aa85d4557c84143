#include "bench/op_costs.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/pipeline/image_buffer.h"
#include "server/pipeline/op.h"
#include "server/pipeline/registry.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::bench {
namespace {

using pipeline::ArgValue;
using pipeline::OpArgs;
using Clock = std::chrono::steady_clock;
using Floats = std::vector<double>;

// The ops timed, with arguments that make each one act on every image (p:
// 1) at a magnitude today's recipes use. bench/ops runs torchvision's
// counterpart of each, under the same name.
struct OpCase {
  const char* name;  // The key in the output; an op name, or op + variant.
  const char* op;
  OpArgs args;
};

std::vector<OpCase> Cases() {
  return {
      {"color_jitter",
       "color_jitter",
       {{"brightness", 0.4},
        {"contrast", 0.4},
        {"saturation", 0.2},
        {"hue", 0.1}}},
      {"random_grayscale", "random_grayscale", {{"p", 1.0}}},
      {"gaussian_blur_23",
       "gaussian_blur",
       {{"kernel_size", int64_t{23}}, {"sigma", Floats{0.1, 2.0}}}},
      {"solarize", "solarize", {{"threshold", 128.0}, {"p", 1.0}}},
      {"posterize", "posterize", {{"bits", int64_t{4}}, {"p", 1.0}}},
      {"equalize", "equalize", {{"p", 1.0}}},
      {"autocontrast", "autocontrast", {{"p", 1.0}}},
      {"adjust_sharpness",
       "adjust_sharpness",
       {{"sharpness_factor", 2.0}, {"p", 1.0}}},
      {"rotate_bilinear",
       "rotate",
       {{"degrees", 30.0}, {"interpolation", std::string("bilinear")}}},
      {"affine",
       "affine",
       {{"degrees", 10.0},
        {"translate", Floats{0.1, 0.1}},
        {"scale", Floats{0.9, 1.1}},
        {"shear", Floats{-5, 5}}}},
      {"trivial_augment_wide",
       "trivial_augment_wide",
       {{"interpolation", std::string("bilinear")}}},
      {"rand_augment",
       "rand_augment",
       {{"num_ops", int64_t{2}}, {"magnitude", int64_t{9}}}},
      {"auto_augment", "auto_augment", {}},
      {"random_erasing", "random_erasing", {{"p", 1.0}}},
  };
}

// The op `c` names, built from the registry as Pipeline::Create builds it.
absl::StatusOr<pipeline::AnyOp> Build(const OpCase& c) {
  const pipeline::OpDef* def = pipeline::OpRegistry::Global().Find(c.op);
  if (def == nullptr) return absl::NotFoundError(c.op);
  absl::StatusOr<OpArgs> args = pipeline::ResolveArgs(*def, c.args);
  if (!args.ok()) return args.status();
  return def->factory(*args);
}

// Seconds per call of `body(i)`, over at least `seconds` after a warmup.
template <typename Body>
double TimePerCall(double seconds, const Body& body) {
  for (int i = 0; i < 8; ++i) body(i);
  int64_t calls = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    for (int i = 0; i < 16; ++i) body(static_cast<int>(calls++));
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return elapsed / static_cast<double>(calls);
}

}  // namespace

int OpCosts(const std::string& image_path, int width, int height,
            double seconds, const std::string& only) {
  std::ifstream file(image_path, std::ios::binary);
  std::vector<uint8_t> base((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  const size_t pixels = static_cast<size_t>(width) * height;
  if (base.size() != pixels * 3) {
    std::fprintf(stderr,
                 "stoker_bench ops: %s holds %zu bytes, not %dx%dx3 RGB\n",
                 image_path.c_str(), base.size(), width, height);
    return 2;
  }
  // What random_erasing works on: the image normalized, float32 CHW.
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float std[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> base_chw(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    for (int c = 0; c < 3; ++c) {
      base_chw[c * pixels + i] = (base[i * 3 + c] / 255.0f - mean[c]) / std[c];
    }
  }
  std::vector<uint8_t> work(base.size());
  std::vector<float> work_chw(base_chw.size());
  // Each call restores the input first; that copy stays in the figure (a
  // torchvision op writes a new output instead) and is reported alone.
  const double copy_hwc = TimePerCall(seconds, [&](int) {
    std::memcpy(work.data(), base.data(), base.size());
  });

  nlohmann::json out;
  out["width"] = width;
  out["height"] = height;
  out["copy_us"] = copy_hwc * 1e6;
  for (const OpCase& c : Cases()) {
    if (!only.empty() && only != c.name) continue;
    absl::StatusOr<pipeline::AnyOp> op = Build(c);
    if (!op.ok()) {
      std::fprintf(stderr, "stoker_bench ops: %s: %s\n", c.name,
                   std::string(op.status().message()).c_str());
      return 1;
    }
    double per_call = 0;
    bool failed = false;
    if (auto* pixel = std::get_if<std::unique_ptr<pipeline::PixelOp>>(&*op)) {
      const pipeline::ImageBuffer image{
          work.data(), static_cast<size_t>(width) * 3, width, height, 3};
      per_call = TimePerCall(seconds, [&](int i) {
        std::memcpy(work.data(), base.data(), base.size());
        pipeline::SampleRng rng(1, 0, static_cast<uint64_t>(i));
        failed |= !(*pixel)->Apply(pipeline::PixelTargets(image), rng).ok();
      });
    } else if (auto* tensor =
                   std::get_if<std::unique_ptr<pipeline::TensorOp>>(&*op)) {
      pipeline::TensorRef ref;
      ref.data = reinterpret_cast<uint8_t*>(work_chw.data());
      ref.dtype = tensor::DType::kFloat32;
      ref.layout = pipeline::Layout::kChw;
      ref.height = height;
      ref.width = width;
      per_call = TimePerCall(seconds, [&](int i) {
        std::memcpy(work_chw.data(), base_chw.data(), base_chw.size() * 4);
        pipeline::SampleRng rng(1, 0, static_cast<uint64_t>(i));
        failed |= !(*tensor)->Apply(ref, rng).ok();
      });
    } else {
      std::fprintf(stderr, "stoker_bench ops: %s is not a pixel or tensor op\n",
                   c.name);
      return 1;
    }
    if (failed) {
      std::fprintf(stderr, "stoker_bench ops: %s failed on the image\n",
                   c.name);
      return 1;
    }
    out["ops"][c.name] = per_call * 1e6;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace stoker::bench
