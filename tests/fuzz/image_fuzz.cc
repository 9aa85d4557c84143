#include "tests/fuzz/image_fuzz.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::pipeline {
namespace {

using Floats = std::vector<double>;

std::unique_ptr<BoundPipeline> MustBind(const std::vector<OpConfig>& ops) {
  auto p = Pipeline::Create("fuzz", ops);
  FuzzCheck(p.ok(), "fuzz", "a fuzz pipeline does not build");
  const InputField schema[] = {
      InputField::Image("image"),
      InputField::Dense("label", tensor::DType::kInt64)};
  auto bound = (*p)->Bind(schema);
  FuzzCheck(bound.ok(), "fuzz", "a fuzz pipeline does not bind");
  return *std::move(bound);
}

std::vector<std::unique_ptr<BoundPipeline>> MakePipelines() {
  const OpArgs normalize = {{"mean", Floats{0.485, 0.456, 0.406}},
                            {"std", Floats{0.229, 0.224, 0.225}},
                            {"dtype", std::string("float32")}};
  std::vector<std::unique_ptr<BoundPipeline>> out;
  out.push_back(MustBind({{"decode_image", {}, 0},
                          {"random_resized_crop", {{"size", int64_t{24}}}, 0},
                          {"random_flip", {}, 0},
                          {"normalize", normalize, 0},
                          {"layout", {{"value", std::string("chw")}}, 0}}));
  out.push_back(MustBind({{"decode_image", {}, 0},
                          {"resize", {{"size", int64_t{40}}}, 0},
                          {"center_crop", {{"size", int64_t{32}}}, 0}}));
  out.push_back(MustBind({{"decode_image", {}, 0},
                          {"resize", {{"size", Floats{7, 300}}}, 0},
                          {"normalize",
                           {{"mean", Floats{0, 0, 0}},
                            {"std", Floats{1, 1, 1}},
                            {"dtype", std::string("float16")}},
                           0}}));
  out.push_back(MustBind({{"decode_image", {}, 0},
                          {"center_crop", {{"size", Floats{64, 48}}}, 0},
                          {"random_flip", {{"p", 1.0}}, 0}}));
  return out;
}

}  // namespace

void FuzzCheck(bool ok, const char* target, const char* what) {
  if (!ok) {
    fprintf(stderr, "%s: %s\n", target, what);
    abort();
  }
}

void FuzzImageThroughPipelines(const char* target, const uint8_t* data,
                               size_t size) {
  static const auto* pipelines =
      new std::vector<std::unique_ptr<BoundPipeline>>(MakePipelines());
  const std::string_view image(reinterpret_cast<const char*>(data), size);
  int64_t label = 7;
  const std::string_view fields[] = {
      image, std::string_view(reinterpret_cast<const char*>(&label), 8)};
  for (size_t i = 0; i < pipelines->size(); ++i) {
    const BoundPipeline& p = *(*pipelines)[i];
    // Exactly-sized heap buffers, so ASan sees a write one byte past them.
    std::vector<std::unique_ptr<uint8_t[]>> buffers;
    std::vector<uint8_t*> dst;
    for (const tensor::TensorSpec& spec : p.outputs()) {
      buffers.emplace_back(new uint8_t[spec.bytes()]);
      dst.push_back(buffers.back().get());
    }
    SampleRng rng(/*seed=*/size, /*epoch=*/i,
                  /*sample_id=*/size > 0 ? data[0] : 0u);
    absl::Status s = p.Run(fields, rng, dst, nullptr);
    if (!s.ok()) {
      FuzzCheck(absl::IsDataLoss(s), target,
                "an undecodable image is not DataLoss");
    } else {
      int64_t out_label = 0;
      std::memcpy(&out_label, dst.back(), 8);
      FuzzCheck(out_label == label, target, "the label was not passed through");
    }
  }
}

}  // namespace stoker::pipeline
