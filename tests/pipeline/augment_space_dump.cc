// augment_space_dump: what tests/python/test_augment_space.py holds
// against torchvision's autoaugment.py.
//
//   augment_space_dump table NUM_BINS HEIGHT WIDTH
//     prints, as JSON, each space's ops in order with `signed` and their
//     magnitudes per bin (null for ops without), and the ImageNet policy.
//   augment_space_dump apply SPACE OP BIN NUM_BINS SIGN INTERP FILL W H N
//     reads N uint8 RGB images of W x H from stdin, applies OP of SPACE
//     (trivial_augment_wide, rand_augment or auto_augment) at BIN (-1: no
//     magnitude) with SIGN (+ or -) as _apply_op does, INTERP nearest or
//     bilinear, FILL "none" or "r,g,b", and writes them to stdout.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "server/pipeline/augment_space.h"

namespace stoker::pipeline {
namespace {

constexpr struct {
  const char* name;
  AugmentSpace space;
} kSpaces[] = {{"trivial_augment_wide", AugmentSpace::kTrivialAugmentWide},
               {"rand_augment", AugmentSpace::kRandAugment},
               {"auto_augment", AugmentSpace::kAutoAugment}};

int Table(int bins, int height, int width) {
  std::printf("{");
  for (const auto& space : kSpaces) {
    std::printf("\"%s\": [", space.name);
    bool first = true;
    for (const AugmentOpInfo& info : SpaceOps(space.space)) {
      std::printf("%s{\"op\": \"%s\", \"signed\": %s, \"magnitudes\": ",
                  first ? "" : ", ",
                  std::string(AugmentOpName(info.op)).c_str(),
                  info.is_signed ? "true" : "false");
      first = false;
      if (!info.has_magnitudes) {
        std::printf("null}");
        continue;
      }
      std::printf("[");
      for (int b = 0; b < bins; ++b) {
        std::printf("%s%.17g", b ? ", " : "",
                    Magnitude(space.space, info.op, b, bins, height, width));
      }
      std::printf("]}");
    }
    std::printf("], ");
  }
  std::printf("\"imagenet_policy\": [");
  bool first = true;
  for (const SubPolicy& policy : ImageNetPolicy()) {
    std::printf("%s[", first ? "" : ", ");
    first = false;
    for (int i = 0; i < 2; ++i) {
      const PolicyStep& step = policy[i];
      std::printf("%s[\"%s\", %.17g, ", i ? ", " : "",
                  std::string(AugmentOpName(step.op)).c_str(), step.p);
      if (step.bin < 0) {
        std::printf("null]");
      } else {
        std::printf("%d]", step.bin);
      }
    }
    std::printf("]");
  }
  std::printf("]}\n");
  return 0;
}

int Apply(char** argv) {
  AugmentSpace space = AugmentSpace::kTrivialAugmentWide;
  bool known_space = false;
  for (const auto& s : kSpaces) {
    if (std::strcmp(argv[0], s.name) == 0) space = s.space, known_space = true;
  }
  const AugmentOpInfo* info = nullptr;
  for (const AugmentOpInfo& i : SpaceOps(space)) {
    if (AugmentOpName(i.op) == argv[1]) info = &i;
  }
  if (!known_space || info == nullptr) {
    std::fprintf(stderr, "unknown space or op\n");
    return 2;
  }
  const int bin = std::atoi(argv[2]), bins = std::atoi(argv[3]);
  const bool negative = std::strcmp(argv[4], "-") == 0;
  const auto interpolation = std::strcmp(argv[5], "bilinear") == 0
                                 ? kernels::WarpInterpolation::kBilinear
                                 : kernels::WarpInterpolation::kNearest;
  kernels::WarpFill fill;
  if (std::strcmp(argv[6], "none") != 0) {
    std::array<float, 3> colour;
    if (std::sscanf(argv[6], "%f,%f,%f", &colour[0], &colour[1], &colour[2]) !=
        3) {
      return 2;
    }
    fill = colour;
  }
  const int w = std::atoi(argv[7]), h = std::atoi(argv[8]);
  const int n = std::atoi(argv[9]);
  std::vector<uint8_t> image(static_cast<size_t>(w) * h * 3);
  for (int i = 0; i < n; ++i) {
    if (std::fread(image.data(), 1, image.size(), stdin) != image.size()) {
      return 3;
    }
    double magnitude = 0;
    if (bin >= 0) magnitude = Magnitude(space, info->op, bin, bins, h, w);
    if (negative) magnitude = -magnitude;
    ApplyAugmentOp(
        ImageBuffer{image.data(), static_cast<size_t>(w) * 3, w, h, 3},
        info->op, magnitude, interpolation, fill);
    std::fwrite(image.data(), 1, image.size(), stdout);
  }
  return 0;
}

}  // namespace
}  // namespace stoker::pipeline

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "table") == 0) {
    return stoker::pipeline::Table(std::atoi(argv[2]), std::atoi(argv[3]),
                                   std::atoi(argv[4]));
  }
  if (argc == 12 && std::strcmp(argv[1], "apply") == 0) {
    return stoker::pipeline::Apply(argv + 2);
  }
  std::fprintf(stderr, "usage: see the comment at the top of the file\n");
  return 2;
}
