// What the image fuzz targets (jpeg_fuzzer.cc, png_fuzzer.cc) share: the
// bytes of a record's image field through what a worker runs per sample,
// under four pipelines of different geometry (random crops, a resize to a
// fixed shape, a centre crop larger than small images, so padded) and
// output formats. decode_image picks the decoder by content, so one set of
// pipelines serves every format; each target adds its own checks after.
//
// What must hold: no crash, no read or write outside a buffer (ASan), every
// refusal is DataLoss, and the label passes through untouched.
#ifndef STOKER_TESTS_FUZZ_IMAGE_FUZZ_H_
#define STOKER_TESTS_FUZZ_IMAGE_FUZZ_H_

#include <cstddef>
#include <cstdint>

namespace stoker::pipeline {

// Aborts, naming `target` and `what`, unless `ok`.
void FuzzCheck(bool ok, const char* target, const char* what);

// Runs `data` as the image of a sample through the four pipelines.
void FuzzImageThroughPipelines(const char* target, const uint8_t* data,
                               size_t size);

}  // namespace stoker::pipeline

#endif  // STOKER_TESTS_FUZZ_IMAGE_FUZZ_H_
