#include "tests/pipeline/reference_decode.h"

#include <turbojpeg.h>

#include <stdexcept>

#include "tests/testing/images.h"

namespace stoker::pipeline::testing {

std::string EncodeRgb(int width, int height, uint32_t seed, int subsamp) {
  const std::vector<uint8_t> px =
      ::stoker::testing::MakePixels(width, height, seed);
  tjhandle handle = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(handle, px.data(), width, 0, height, TJPF_RGB,
                             &out, &size, subsamp, 90, 0);
  std::string jpeg;
  if (rc == 0) jpeg.assign(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(handle);
  if (rc != 0) throw std::runtime_error("tjCompress2 failed");
  return jpeg;
}

std::string MakeProgressive(const std::string& jpeg) {
  tjhandle handle = tjInitTransform();
  tjtransform transform = {};
  transform.op = TJXOP_NONE;
  transform.options = TJXOPT_PROGRESSIVE;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc =
      tjTransform(handle, reinterpret_cast<const unsigned char*>(jpeg.data()),
                  jpeg.size(), 1, &out, &size, &transform, 0);
  std::string progressive;
  if (rc == 0) progressive.assign(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(handle);
  if (rc != 0) throw std::runtime_error("tjTransform failed");
  return progressive;
}

RgbImage TurboDecode(const std::string& jpeg, int scale) {
  tjhandle handle = tjInitDecompress();
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, jpeg.size(), &width, &height, &subsamp,
                          &colorspace) != 0) {
    tjDestroy(handle);
    throw std::runtime_error("tjDecompressHeader3 failed");
  }
  RgbImage image;
  // tjDecompress2 picks the largest scaling factor whose output fits the
  // requested size, which for ceil(size * scale / 8) is scale/8 itself.
  image.width = (width * scale + 7) / 8;
  image.height = (height * scale + 7) / 8;
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> raw(static_cast<size_t>(image.width) * image.height *
                           (cmyk ? 4 : 3));
  const int rc =
      tjDecompress2(handle, data, jpeg.size(), raw.data(), image.width, 0,
                    image.height, cmyk ? TJPF_CMYK : TJPF_RGB, 0);
  tjDestroy(handle);
  if (rc != 0) throw std::runtime_error("tjDecompress2 failed");
  if (!cmyk) {
    image.pixels = std::move(raw);
    return image;
  }
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  for (size_t i = 0; i < image.pixels.size() / 3; ++i) {
    const uint8_t* p = &raw[4 * i];
    for (int c = 0; c < 3; ++c) {
      image.pixels[3 * i + c] = static_cast<uint8_t>((p[c] * p[3] + 127) / 255);
    }
  }
  return image;
}

}  // namespace stoker::pipeline::testing
