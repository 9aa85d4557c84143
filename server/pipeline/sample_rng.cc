#include "server/pipeline/sample_rng.h"

#include <cmath>

namespace stoker::pipeline {
namespace {

// SplitMix64's finalizer: a bijective mix with full avalanche.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

SampleRng::SampleRng(uint64_t seed, uint64_t epoch, uint64_t sample_id,
                     uint32_t rep)
    : SampleRng(Subkeyed{}, seed, epoch, sample_id, rep) {}

SampleRng::SampleRng(Subkeyed, uint64_t seed, uint64_t epoch, uint64_t id,
                     uint64_t subkey) {
  // Each key part goes through its own mix before it is folded in, so that
  // nearby (epoch, sample_id) pairs land on unrelated streams.
  uint64_t key = Mix64(seed + kGolden);
  key = Mix64(key ^ Mix64(epoch + 2 * kGolden));
  key = Mix64(key ^ Mix64(id + 3 * kGolden));
  Seed(key, subkey);
}

SampleRng::SampleRng(const SampleRng& sample, uint32_t instance) {
  Seed(sample.base_,
       (sample.subkey_ & 0xffffffffULL) | (uint64_t{instance} << 32));
}

void SampleRng::Seed(uint64_t base, uint64_t subkey) {
  base_ = base;
  subkey_ = subkey;
  // A subkey of 0 adds nothing, so sample generators keep the streams they
  // had before reps and views existed.
  uint64_t key = base;
  if (subkey != 0) key = Mix64(key ^ Mix64(subkey + 4 * kGolden));
  for (uint64_t& word : state_) {
    key += kGolden;
    word = Mix64(key);
  }
}

uint64_t SampleRng::Next() {
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return result;
}

double SampleRng::Uniform(double lo, double hi) {
  // The top 53 bits give every double in [0, 1) on a 2^-53 grid.
  const double unit = static_cast<double>(Next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * unit;
}

int64_t SampleRng::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(Next());
  const uint64_t range = span + 1;
  // Lemire's multiply-and-reject: unbiased, rarely more than one draw.
  unsigned __int128 product = static_cast<unsigned __int128>(Next()) * range;
  uint64_t low = static_cast<uint64_t>(product);
  if (low < range) {
    const uint64_t threshold = (0 - range) % range;
    while (low < threshold) {
      product = static_cast<unsigned __int128>(Next()) * range;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<int64_t>(static_cast<uint64_t>(lo) +
                              static_cast<uint64_t>(product >> 64));
}

bool SampleRng::Bernoulli(double p) {
  if (p <= 0.0) return false;
  if (p >= 1.0) return true;
  return Uniform(0.0, 1.0) < p;
}

SampleRng SampleRng::ForBatch(uint64_t seed, uint64_t epoch, uint64_t step,
                              uint32_t rank) {
  return SampleRng(Subkeyed{}, seed, epoch, step, (uint64_t{1} << 63) | rank);
}

double SampleRng::Normal() {
  constexpr double kTwoPi = 6.283185307179586476925;
  // 1 - u keeps the log's argument in (0, 1].
  const double u1 = 1.0 - Uniform(0.0, 1.0);
  const double u2 = Uniform(0.0, 1.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

double SampleRng::LogGamma(double alpha) {
  // Marsaglia-Tsang needs alpha >= 1; below it, Gamma(alpha) is
  // Gamma(alpha + 1) * U^(1 / alpha), added here as a log.
  double boost = 0.0;
  if (alpha < 1.0) {
    boost = std::log(1.0 - Uniform(0.0, 1.0)) / alpha;
    alpha += 1.0;
  }
  const double d = alpha - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = Normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - Uniform(0.0, 1.0);  // In (0, 1].
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 ||
        std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) {
      return std::log(d * v) + boost;
    }
  }
}

double SampleRng::Gamma(double alpha) { return std::exp(LogGamma(alpha)); }

double SampleRng::Beta(double a, double b) {
  const double lx = LogGamma(a);
  const double ly = LogGamma(b);
  // X / (X + Y) = 1 / (1 + exp(log Y - log X)): no 0 / 0 when both
  // underflow, and exp's overflow to infinity gives 0.
  return 1.0 / (1.0 + std::exp(ly - lx));
}

}  // namespace stoker::pipeline
