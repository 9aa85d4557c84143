// Which samples a rank of a job receives at each (epoch, step).
//
// Epoch e visits the N samples in the order EpochPermutation(N, seed, e): a
// Fisher-Yates shuffle of 0..N-1 over the whole dataset (not a shuffle
// buffer), driven by our own counter-based generator (splitmix64 keyed by a
// mix of seed and epoch, bounded draws by Lemire's method), so the order is
// the same on every platform and standard library.
//
// A global step covers W*B consecutive entries of the permutation (W ranks,
// batch size B); rank r takes the r-th block of B. After the F = floor(N/WB)
// full global steps, R = N mod WB entries remain. With drop_last they are
// left out. Without it they form one last global step, split so that the
// ranks together take each exactly once: rank r takes the contiguous chunk
// tail[r*C, min((r+1)*C, R)) with C = ceil(R/W). Ranks whose chunk is empty
// have one step fewer in the epoch.
//
// Worked example: N = 10, B = 2, W = 3, permutation p0..p9. WB = 6, F = 1,
// R = 4, C = 2.
//   step 0:  rank 0: p0 p1   rank 1: p2 p3   rank 2: p4 p5
//   step 1:  rank 0: p6 p7   rank 1: p8 p9   rank 2: (no step)
// Ranks 0 and 1 have 2 steps per epoch, rank 2 has 1. With drop_last every
// rank has 1 step and p6..p9 are left out of the epoch.
#ifndef STOKER_SERVER_DATASET_SAMPLER_H_
#define STOKER_SERVER_DATASET_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::dataset {

// The order in which epoch `epoch` visits samples 0..n-1. A pure function
// of its arguments. Thread-safe.
std::vector<uint64_t> EpochPermutation(uint64_t n, uint64_t seed,
                                       uint64_t epoch);

struct SamplerOptions {
  uint64_t num_samples = 0;
  uint64_t seed = 0;
  uint32_t batch_size = 0;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  bool drop_last = false;
};

// The sample ids of one rank, step by step. Thread-compatible: StepSamples
// caches a permutation, so a Sampler must not be used by two threads at once.
class Sampler {
 public:
  // InvalidArgument naming the bad field: num_samples 0, batch_size 0,
  // world_size 0, rank >= world_size, or drop_last with fewer samples than
  // one global step.
  static absl::StatusOr<Sampler> Create(const SamplerOptions& o);

  const SamplerOptions& options() const { return options_; }

  // Steps and samples per epoch for this rank.
  uint64_t StepsPerEpoch() const;
  uint64_t SamplesPerEpoch() const;

  // The ids this rank receives at (epoch, step), in order.
  // REQUIRES: step < StepsPerEpoch() (else the process aborts).
  std::vector<uint64_t> StepSamples(uint64_t epoch, uint64_t step);

  // EpochPermutation(num_samples, seed, epoch), cached for the last epoch
  // asked for. Each stream has its own Sampler and so its own cache; the
  // pointer is shared so that a caller may keep it while the cache moves on.
  std::shared_ptr<const std::vector<uint64_t>> Permutation(uint64_t epoch);

 private:
  explicit Sampler(const SamplerOptions& o);

  // Number of entries of the final partial global step this rank takes, and
  // where in the permutation they start.
  uint64_t TailCount() const;
  uint64_t TailOffset() const;

  SamplerOptions options_;
  uint64_t global_batch_;  // W*B.
  uint64_t full_steps_;    // floor(N / W*B).
  uint64_t tail_chunk_;    // ceil(R / W); 0 with drop_last.

  uint64_t cached_epoch_ = 0;
  std::shared_ptr<const std::vector<uint64_t>> cached_;  // Null until used.
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_SAMPLER_H_
