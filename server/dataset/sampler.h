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
//
// Repeated augmentation (ra_reps = k > 1, docs/pipeline-design.md §4.5):
// the epoch is the sequence of N*k entries E[j] = (p[j / k], rep = j % k),
// and everything above applies to E instead of p, except that a rank takes
// the entries of a global step (and of the tail) strided, not blocked: rank
// r takes entries s*WB + r, s*WB + r + W, ... So entry j always goes to rank
// j mod W, and a sample's k adjacent copies land on k different ranks when
// k <= W, as torchvision's RASampler spreads them (rank r's entries are
// E[r::W], RASampler's order before it pads and truncates). The tail gives
// rank r the ceil((R - r) / W) entries left at r, r+W, ... (none if r >= R).
// Example: N = 3, k = 2, B = 2, W = 2: E = (p0,0) (p0,1) (p1,0) (p1,1)
// (p2,0) (p2,1); WB = 4, F = 1, R = 2.
//   step 0:  rank 0: (p0,0) (p1,0)   rank 1: (p0,1) (p1,1)
//   step 1:  rank 0: (p2,0)          rank 1: (p2,1)
// k = 1 is the blocked rule above, byte for byte.
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
  uint32_t ra_reps = 1;  // Copies of each sample per epoch (1..kMaxRaReps).
};

// The bound on SamplerOptions::ra_reps.
inline constexpr uint32_t kMaxRaReps = 64;

// The entries of one step of one rank: sample ids and, parallel to them,
// which copy of the sample each is (0 when ra_reps is 1).
struct StepEntries {
  std::vector<uint64_t> ids;
  std::vector<uint32_t> reps;
};

// The sample ids of one rank, step by step. Thread-compatible: StepSamples
// caches a permutation, so a Sampler must not be used by two threads at once.
class Sampler {
 public:
  // InvalidArgument naming the bad field: num_samples 0, batch_size 0,
  // world_size 0, rank >= world_size, ra_reps outside 1..kMaxRaReps, or
  // drop_last with fewer entries (num_samples * ra_reps) than one global
  // step.
  static absl::StatusOr<Sampler> Create(const SamplerOptions& o);

  const SamplerOptions& options() const { return options_; }

  // Steps and entries (samples, counting each copy) per epoch for this
  // rank.
  uint64_t StepsPerEpoch() const;
  uint64_t SamplesPerEpoch() const;

  // The entries this rank receives at (epoch, step), in order.
  // REQUIRES: step < StepsPerEpoch() (else the process aborts).
  StepEntries Step(uint64_t epoch, uint64_t step);
  // Step(epoch, step).ids.
  std::vector<uint64_t> StepSamples(uint64_t epoch, uint64_t step) {
    return Step(epoch, step).ids;
  }

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
  uint64_t entries_;       // M = N * ra_reps.
  uint64_t global_batch_;  // W*B.
  uint64_t full_steps_;    // floor(M / W*B).
  uint64_t tail_chunk_;    // Blocked: ceil(R / W); strided: R; 0 with drop_last.

  uint64_t cached_epoch_ = 0;
  std::shared_ptr<const std::vector<uint64_t>> cached_;  // Null until used.
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_SAMPLER_H_
