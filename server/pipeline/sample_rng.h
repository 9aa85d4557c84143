// SampleRng: the random generator one sample's augmentations draw from.
//
// Its stream is a pure function of (seed, epoch, sample_id, rep), so every
// random choice made for a sample is reproducible whatever the worker count, thread
// timing or restart. The engine is xoshiro256** seeded through SplitMix64.
//
// Thread-safety: not thread-safe. Create one per sample, on the thread that
// processes it.
#ifndef STOKER_SERVER_PIPELINE_SAMPLE_RNG_H_
#define STOKER_SERVER_PIPELINE_SAMPLE_RNG_H_

#include <cstdint>

namespace stoker::pipeline {

class SampleRng {
 public:
  // `rep` is which copy of the sample this is under repeated augmentation
  // (ra_reps, docs/pipeline-design.md §4.5): each copy gets its own stream.
  // rep 0 adds nothing to the key, so a stream without repeats is unchanged.
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t sample_id,
            uint32_t rep = 0);

  SampleRng(const SampleRng&) = delete;
  SampleRng& operator=(const SampleRng&) = delete;

  // The next 64 uniformly distributed bits.
  uint64_t Next();

  // A double uniformly distributed in [lo, hi). REQUIRES: lo <= hi.
  double Uniform(double lo, double hi);

  // An integer uniformly distributed in [lo, hi], both inclusive, without
  // modulo bias. REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);

  // True with probability p. p <= 0 is never true and p >= 1 always is;
  // neither draws from the stream.
  bool Bernoulli(double p);

 private:
  uint64_t state_[4];
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_SAMPLE_RNG_H_
