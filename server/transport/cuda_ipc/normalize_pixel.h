// One pixel of the device normalize (device_normalize.h), written once for
// the host reference and the kernel, so that both do the same arithmetic:
// a table look-up per channel, and the output's place in CHW or HWC.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_NORMALIZE_PIXEL_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_NORMALIZE_PIXEL_H_

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define STOKER_HOST_DEVICE __host__ __device__
#else
#define STOKER_HOST_DEVICE
#endif

namespace stoker::transport {

// Pixel `pixel` of a batch of images of `plane` pixels each (the batch's
// pixels counted across its samples), read as 3 bytes from `src` and
// written as 3 elements of T to `dst`. `table` has 256 entries per
// channel; T takes the low bits of an entry.
template <typename T>
STOKER_HOST_DEVICE inline void NormalizePixel(const uint32_t* table,
                                              const uint8_t* src, size_t pixel,
                                              size_t plane, bool chw, T* dst) {
  const uint8_t* in = src + 3 * pixel;
  const T r = static_cast<T>(table[in[0]]);
  const T g = static_cast<T>(table[256 + in[1]]);
  const T b = static_cast<T>(table[512 + in[2]]);
  if (chw) {
    const size_t sample = pixel / plane;
    T* out = dst + sample * 3 * plane + (pixel - sample * plane);
    out[0] = r;
    out[plane] = g;
    out[2 * plane] = b;
  } else {
    T* out = dst + 3 * pixel;
    out[0] = r;
    out[1] = g;
    out[2] = b;
  }
}

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_NORMALIZE_PIXEL_H_
