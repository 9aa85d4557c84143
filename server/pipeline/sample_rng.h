// SampleRng: the random generator one sample's augmentations draw from.
//
// Its stream is a pure function of (seed, epoch, sample_id, rep) and, in a
// multi-view pipeline, the view instance, so every random choice made for a
// sample is reproducible whatever the worker count, thread timing or
// restart. The engine is xoshiro256** seeded through SplitMix64.
// ForBatch gives the generator of a whole batch's choices (MixUp's lambda,
// CutMix's box), a pure function of (seed, epoch, step, rank) on a stream
// no sample's generator can share.
//
// Thread-safety: not thread-safe. Create one per sample (or batch), on the
// thread that processes it.
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

  // The generator of the batch at (epoch, step) of `rank`'s stream. Its key
  // carries bit 63 in a part that sample keys leave out, so it is never a
  // sample's generator (docs/pipeline-design.md §5).
  static SampleRng ForBatch(uint64_t seed, uint64_t epoch, uint64_t step,
                            uint32_t rank);

  // The generator of view instance `instance` of the sample whose
  // instance-0 generator `sample` is (docs/pipeline-design.md §4.4): the
  // key of `sample` with the instance beside its rep, so instances draw
  // independent streams and instance 0 is `sample`'s own. Reads only the
  // key, not how far `sample` has drawn. REQUIRES: `sample` is a sample's
  // generator, not ForBatch's; instance < 2^31.
  SampleRng(const SampleRng& sample, uint32_t instance);

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

  // A standard normal draw (Box-Muller; two uniforms per draw, the second
  // value of the pair is not kept, so the stream's use is fixed per call).
  double Normal();

  // A draw from Gamma(alpha, 1), by Marsaglia and Tsang's method (ACM TOMS
  // 26(3), 2000); for alpha < 1 through Gamma(alpha + 1) * U^(1 / alpha).
  // REQUIRES: alpha > 0.
  double Gamma(double alpha);

  // A draw from Beta(a, b) as X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b),
  // computed from the logs of X and Y so that tiny alphas (whose draws
  // underflow a double) still give a value in [0, 1]. REQUIRES: a, b > 0.
  double Beta(double a, double b);

 private:
  // The key (seed, epoch, id, subkey); a subkey of 0 adds nothing. A rep
  // is the subkey's low 32 bits, a view instance bits 32 to 62; a batch's
  // subkey has bit 63.
  struct Subkeyed {};
  SampleRng(Subkeyed, uint64_t seed, uint64_t epoch, uint64_t id,
            uint64_t subkey);
  // Seeds the state from (seed, epoch, id) mixed into `base` and `subkey`.
  void Seed(uint64_t base, uint64_t subkey);

  // log(X) for X ~ Gamma(alpha, 1).
  double LogGamma(double alpha);

  uint64_t base_ = 0;  // (seed, epoch, id) mixed, before the subkey.
  uint64_t subkey_ = 0;
  uint64_t state_[4];
};

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_SAMPLE_RNG_H_
