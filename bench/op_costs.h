// stoker_bench ops: the cost of each pixel and tensor op that today's
// recipes use, alone, on one image, one thread (bench/ops sets it against
// torchvision's on the same image).
#ifndef STOKER_BENCH_OP_COSTS_H_
#define STOKER_BENCH_OP_COSTS_H_

#include <string>

namespace stoker::bench {

// Reads `image_path`, width x height RGB bytes (rows packed), and times
// each op on it for at least `seconds`, restoring the image before every
// call (that copy is in the figure, as a torchvision op writes a new
// output; copy_us is the copy alone). Prints one JSON object:
// {"width", "height", "copy_us", "ops": {NAME: microseconds per image}}.
// With `only` not empty, times that op alone (for a profiler). Returns 0,
// 1 when an op cannot be built or fails, 2 for a bad image file.
int OpCosts(const std::string& image_path, int width, int height,
            double seconds, const std::string& only);

}  // namespace stoker::bench

#endif  // STOKER_BENCH_OP_COSTS_H_
