// ImageBuffer: a borrowed view of a uint8 image in memory, interleaved
// (HWC), rows `stride` bytes apart. The render step hands pixel ops one of
// these; whoever fills it in says how long the memory stays valid.
//
// Thread-safety: a plain value; the pixels belong to one sample's thread.
#ifndef STOKER_SERVER_PIPELINE_IMAGE_BUFFER_H_
#define STOKER_SERVER_PIPELINE_IMAGE_BUFFER_H_

#include <cstddef>
#include <cstdint>

namespace stoker::pipeline {

struct ImageBuffer {
  uint8_t* data = nullptr;  // The top-left pixel; borrowed.
  size_t stride = 0;        // Bytes from one row to the next.
  int width = 0, height = 0;
  int channels = 3;  // Bytes per pixel: 3 (RGB) today.

  uint8_t* row(int y) const { return data + static_cast<size_t>(y) * stride; }
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_IMAGE_BUFFER_H_
