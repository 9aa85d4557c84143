// stoker_scale_bench: what a train crop costs to decode at each DCT scale.
//
//   stoker_scale_bench DIR --scale M [--images N] [--out 224]
//
// Reads the first N JPEGs under DIR (sorted), picks one crop per image as
// random_resized_crop does (area 8-100 %, aspect 3/4-4/3, fixed seed), and
// decodes every crop's window at scale M/8 with the pipeline's JpegDecoder,
// whether or not M/8 covers the output, then resizes it to out x out with
// INTER_LINEAR. Prints one JSON object: CPU milliseconds per image for the
// decode and for the resize (this thread's CPU clock). For instruction
// counts run it under callgrind with
//   --toggle-collect='stoker::pipeline::JpegDecoder::DecodeWindow*'.
// It answers whether a scale other than 1, 2, 4 or 8 pays for itself
// (docs/performance.md); it is not part of bench/run.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "server/pipeline/jpeg_decoder.h"

namespace {

using stoker::pipeline::DecodedWindow;
using stoker::pipeline::JpegDecoder;
using stoker::pipeline::PixelWindow;

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

struct Crop {
  int x, y, width, height;
};

// torchvision's RandomResizedCrop.get_params, without its fallback (the
// whole image stands in for it).
Crop ChooseCrop(int width, int height, std::mt19937& rng) {
  std::uniform_real_distribution<> area_share(0.08, 1.0);
  std::uniform_real_distribution<> log_ratio(std::log(3.0 / 4.0),
                                             std::log(4.0 / 3.0));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = width * height * area_share(rng);
    const double ratio = std::exp(log_ratio(rng));
    const int w = static_cast<int>(std::lround(std::sqrt(area * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(area / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      return {std::uniform_int_distribution<>(0, width - w)(rng),
              std::uniform_int_distribution<>(0, height - h)(rng), w, h};
    }
  }
  return {0, 0, width, height};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("stoker_scale_bench: train-crop decode cost per DCT scale");
  std::string dir;
  int scale = 8, images = 300, out = 224;
  app.add_option("dir", dir, "Folder of JPEG files")->required();
  app.add_option("--scale", scale, "DCT scale numerator M (decode at M/8)")
      ->check(CLI::Range(1, 8));
  app.add_option("--images", images, "How many JPEGs to read");
  app.add_option("--out", out, "Output side");
  CLI11_PARSE(app, argc, argv);
  cv::setNumThreads(0);

  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".jpg") {
      paths.push_back(e.path());
    }
  }
  std::sort(paths.begin(), paths.end());
  paths.resize(std::min<size_t>(paths.size(), images));
  std::mt19937 rng(1);
  double decode_s = 0, resize_s = 0;
  int failures = 0;
  cv::Mat resized(out, out, CV_8UC3);
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    const std::string jpeg((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    const double t0 = ThreadCpuSeconds();
    JpegDecoder decoder;
    DecodedWindow window;
    if (!decoder.ReadHeader(jpeg).ok()) {
      ++failures;
      continue;
    }
    const Crop c = ChooseCrop(decoder.width(), decoder.height(), rng);
    const int scaled_w = JpegDecoder::ScaledSize(decoder.width(), scale);
    const int scaled_h = JpegDecoder::ScaledSize(decoder.height(), scale);
    PixelWindow w;
    w.x0 = static_cast<int>(std::lround(c.x * scale / 8.0));
    w.y0 = static_cast<int>(std::lround(c.y * scale / 8.0));
    w.x1 = std::clamp(static_cast<int>(std::lround((c.x + c.width) * scale / 8.0)),
                      w.x0 + 1, scaled_w);
    w.y1 = std::clamp(static_cast<int>(std::lround((c.y + c.height) * scale / 8.0)),
                      w.y0 + 1, scaled_h);
    if (!decoder.DecodeWindow(scale, w, &window).ok()) {
      ++failures;
      continue;
    }
    const double t1 = ThreadCpuSeconds();
    const cv::Mat pixels(window.height, window.width, CV_8UC3,
                         const_cast<uint8_t*>(window.data()), window.stride);
    cv::resize(pixels, resized, resized.size(), 0, 0, cv::INTER_LINEAR);
    resize_s += ThreadCpuSeconds() - t1;
    decode_s += t1 - t0;
  }
  const double n = static_cast<double>(paths.size() - failures);
  nlohmann::json result = {{"scale", scale},
                           {"images", paths.size() - failures},
                           {"failures", failures},
                           {"decode_cpu_ms_per_image", 1e3 * decode_s / n},
                           {"resize_cpu_ms_per_image", 1e3 * resize_s / n}};
  std::printf("%s\n", result.dump().c_str());
  return failures == 0 ? 0 : 1;
}
