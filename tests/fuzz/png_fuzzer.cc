// Fuzzes the PNG decode path: the bytes of a record's image field through
// what a worker runs per sample (decode_image sniffs them; libpng's header,
// colour conversion, row-by-row windowed decode or the whole Adam7 decode,
// resize, conversion into the batch buffer), under four pipelines of
// different geometry (random crops, a resize to a fixed shape, a centre
// crop larger than small images, so padded) and output formats; then the
// full check `stoker pack` runs on every source file (ValidateImage).
//
// What must hold: no crash, no read or write outside a buffer (ASan), every
// refusal is DataLoss, and the label passes through untouched.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/pipeline/decoders/png_decoder.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::pipeline {
namespace {

using Floats = std::vector<double>;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_png: %s\n", what);
    abort();
  }
}

std::unique_ptr<BoundPipeline> MustBind(const std::vector<OpConfig>& ops) {
  auto p = Pipeline::Create("fuzz", ops);
  Check(p.ok(), "a fuzz pipeline does not build");
  const InputField schema[] = {{"image", false}, {"label", true}};
  auto bound = (*p)->Bind(schema);
  Check(bound.ok(), "a fuzz pipeline does not bind");
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
}  // namespace stoker::pipeline

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoker::pipeline;  // NOLINT: a fuzzer's entry point.
  static const auto* pipelines =
      new std::vector<std::unique_ptr<BoundPipeline>>(MakePipelines());
  const std::string_view png(reinterpret_cast<const char*>(data), size);
  int64_t label = 7;
  const std::string_view fields[] = {
      png, std::string_view(reinterpret_cast<const char*>(&label), 8)};
  for (size_t i = 0; i < pipelines->size(); ++i) {
    const BoundPipeline& p = *(*pipelines)[i];
    // Exactly-sized heap buffers, so ASan sees a write one byte past them.
    std::vector<std::unique_ptr<uint8_t[]>> buffers;
    std::vector<uint8_t*> dst;
    for (const TensorSpec& spec : p.outputs()) {
      buffers.emplace_back(new uint8_t[spec.bytes()]);
      dst.push_back(buffers.back().get());
    }
    SampleRng rng(/*seed=*/size, /*epoch=*/i,
                  /*sample_id=*/size > 0 ? data[0] : 0u);
    absl::Status s = p.Run(fields, rng, dst, nullptr);
    if (!s.ok()) {
      Check(absl::IsDataLoss(s), "an undecodable PNG is not DataLoss");
    } else {
      int64_t out_label = 0;
      std::memcpy(&out_label, dst.back(), 8);
      Check(out_label == label, "the label was not passed through");
    }
  }
  absl::Status full = ValidateImage(png);
  Check(full.ok() || absl::IsDataLoss(full),
        "ValidateImage refused with a code other than DataLoss");
  // A window's rows come from the same decode as the whole image's: if the
  // whole image validates, any window of it decodes.
  if (full.ok() && SniffImageFormat(png) == ImageFormat::kPng) {
    PngDecoder decoder;  // The daemon's default limit, as a worker has.
    if (!decoder.ReadHeader(png).ok()) return 0;  // Over the limit.
    const int w = decoder.width(), h = decoder.height();
    const PixelWindow window{w / 3, h / 2, w - w / 4, h};
    DecodedWindow out;
    if (window.width() > 0 && window.height() > 0) {
      Check(decoder.DecodeWindow(8, window, &out).ok(),
            "a window of a valid PNG does not decode");
    }
  }
  return 0;
}
