#include "server/pipeline/sample_rng.h"

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
                     uint32_t rep) {
  // Each key part goes through its own mix before it is folded in, so that
  // nearby (epoch, sample_id) pairs land on unrelated streams.
  uint64_t key = Mix64(seed + kGolden);
  key = Mix64(key ^ Mix64(epoch + 2 * kGolden));
  key = Mix64(key ^ Mix64(sample_id + 3 * kGolden));
  if (rep != 0) key = Mix64(key ^ Mix64(rep + 4 * kGolden));
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

}  // namespace stoker::pipeline
