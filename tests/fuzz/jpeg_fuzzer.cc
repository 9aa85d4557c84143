// Fuzzes the JPEG decode path: a record's image field through the fused
// decode (header, scaled and windowed decode, CMYK conversion, resize,
// conversion into the batch buffer) of pipeline.h and image_plan.h, under
// the pipelines of image_fuzz.h; then the full check `stoker pack` runs on
// every source file (ValidateJpeg), which may refuse only with DataLoss.
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "server/pipeline/jpeg_decoder.h"
#include "tests/fuzz/image_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoker::pipeline;  // NOLINT: a fuzzer's entry point.
  FuzzImageThroughPipelines("fuzz_jpeg", data, size);
  const absl::Status full =
      ValidateJpeg(std::string_view(reinterpret_cast<const char*>(data), size));
  FuzzCheck(full.ok() || absl::IsDataLoss(full), "fuzz_jpeg",
            "ValidateJpeg refused with a code other than DataLoss");
  return 0;
}
