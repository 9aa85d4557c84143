// Fuzzes the decode path of every image format but JPEG (which
// jpeg_fuzzer.cc has): PNG through libpng, WebP through libwebp, TIFF
// through libtiff. A record's image field goes
// through what a worker runs per sample (decode_image sniffs it; the
// header, the windowed or whole decode, resize, conversion into the batch
// buffer), under the pipelines of image_fuzz.h; then the full check `stoker
// pack` runs on every source file (ValidateImage), which may refuse only
// with DataLoss, and a window of an image that validated, which must decode.
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "tests/fuzz/image_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoker::pipeline;  // NOLINT: a fuzzer's entry point.
  FuzzImageThroughPipelines("fuzz_image", data, size);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::Status full = ValidateImage(bytes);
  FuzzCheck(full.ok() || absl::IsDataLoss(full), "fuzz_image",
            "ValidateImage refused with a code other than DataLoss");
  // A window's pixels come from the same decode as the whole image's: if
  // the whole image validates, any window of it decodes.
  if (full.ok() && SniffImageFormat(bytes) != ImageFormat::kJpeg) {
    DecoderSet decoders;  // The daemon's default limit, as a worker has.
    absl::StatusOr<ImageDecoder*> decoder = decoders.Open(bytes);
    if (!decoder.ok()) return 0;  // Over the limit.
    const int w = (*decoder)->width(), h = (*decoder)->height();
    const PixelWindow window{w / 3, h / 2, w - w / 4, h};
    DecodedWindow out;
    if (window.width() > 0 && window.height() > 0) {
      FuzzCheck((*decoder)->DecodeWindow(8, window, &out).ok(), "fuzz_image",
                "a window of a valid image does not decode");
    }
  }
  return 0;
}
