#include "server/dataset/sampler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// The splitmix64 output function.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Counter-based splitmix64: draw i is Mix64(key + (i + 1) * golden), so a
// stream is fixed by its key alone.
class CounterRng {
 public:
  explicit CounterRng(uint64_t key) : state_(key) {}

  uint64_t Next() { return Mix64(state_ += kGolden); }

  // Uniform in [0, range) by Lemire's multiply-and-reject method.
  // REQUIRES: range > 0.
  uint64_t Below(uint64_t range) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * range;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < range) {
      const uint64_t threshold = (0 - range) % range;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * range;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<uint64_t> EpochPermutation(uint64_t n, uint64_t seed,
                                       uint64_t epoch) {
  std::vector<uint64_t> p(n);
  for (uint64_t i = 0; i < n; ++i) p[i] = i;
  CounterRng rng(Mix64(seed ^ Mix64(epoch + kGolden)));
  for (uint64_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.Below(i)]);
  return p;
}

absl::StatusOr<Sampler> Sampler::Create(const SamplerOptions& o) {
  if (o.num_samples == 0) {
    return absl::InvalidArgumentError("num_samples is 0 (empty dataset)");
  }
  if (o.batch_size == 0) return absl::InvalidArgumentError("batch_size is 0");
  if (o.world_size == 0) return absl::InvalidArgumentError("world_size is 0");
  if (o.rank >= o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", o.rank, " is not below world_size ", o.world_size));
  }
  if (o.ra_reps < 1 || o.ra_reps > kMaxRaReps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ra_reps ", o.ra_reps, " is outside 1..", kMaxRaReps));
  }
  const uint64_t global_batch = uint64_t{o.world_size} * o.batch_size;
  const uint64_t entries = o.num_samples * o.ra_reps;
  if (o.drop_last && entries < global_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drop_last with num_samples ", o.num_samples,
        o.ra_reps > 1 ? absl::StrCat(" * ra_reps ", o.ra_reps) : "",
        " below world_size*batch_size ", global_batch, " leaves no step"));
  }
  return Sampler(o);
}

Sampler::Sampler(const SamplerOptions& o)
    : options_(o),
      entries_(o.num_samples * o.ra_reps),
      global_batch_(uint64_t{o.world_size} * o.batch_size),
      full_steps_(entries_ / global_batch_) {
  const uint64_t rest = entries_ % global_batch_;
  if (o.drop_last) {
    tail_chunk_ = 0;
  } else if (o.ra_reps > 1) {
    tail_chunk_ = rest;  // Strided: the ranks share the whole tail.
  } else {
    tail_chunk_ = (rest + o.world_size - 1) / o.world_size;
  }
}

uint64_t Sampler::TailOffset() const {
  const uint64_t start = full_steps_ * global_batch_;
  return options_.ra_reps > 1 ? start + options_.rank
                              : start + options_.rank * tail_chunk_;
}

uint64_t Sampler::TailCount() const {
  const uint64_t offset = TailOffset();
  if (tail_chunk_ == 0 || offset >= entries_) return 0;
  if (options_.ra_reps > 1) {  // Entries offset, offset + W, ... below M.
    return (entries_ - offset + options_.world_size - 1) / options_.world_size;
  }
  return std::min(tail_chunk_, entries_ - offset);
}

uint64_t Sampler::StepsPerEpoch() const {
  return full_steps_ + (TailCount() > 0 ? 1 : 0);
}

uint64_t Sampler::SamplesPerEpoch() const {
  return full_steps_ * options_.batch_size + TailCount();
}

StepEntries Sampler::Step(uint64_t epoch, uint64_t step) {
  if (step >= StepsPerEpoch()) {  // A caller's bug: abort, like a CHECK.
    std::fprintf(stderr, "stoker: Sampler::StepSamples: step %llu of %llu\n",
                 static_cast<unsigned long long>(step),
                 static_cast<unsigned long long>(StepsPerEpoch()));
    std::abort();
  }
  const std::shared_ptr<const std::vector<uint64_t>> perm = Permutation(epoch);
  const bool tail = step == full_steps_;
  const uint64_t count = tail ? TailCount() : options_.batch_size;
  StepEntries out;
  if (options_.ra_reps == 1) {
    const uint64_t offset =
        tail ? TailOffset()
             : step * global_batch_ +
                   uint64_t{options_.rank} * options_.batch_size;
    out.ids.assign(perm->begin() + offset, perm->begin() + offset + count);
    out.reps.assign(count, 0);
    return out;
  }
  // Strided: entry j = step*WB + rank + i*W is copy j % k of p[j / k].
  const uint64_t k = options_.ra_reps;
  const uint64_t first = step * global_batch_ + options_.rank;
  out.ids.reserve(count);
  out.reps.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t j = first + i * options_.world_size;
    out.ids.push_back((*perm)[j / k]);
    out.reps.push_back(static_cast<uint32_t>(j % k));
  }
  return out;
}

std::shared_ptr<const std::vector<uint64_t>> Sampler::Permutation(
    uint64_t epoch) {
  if (cached_ == nullptr || cached_epoch_ != epoch) {
    cached_ = std::make_shared<const std::vector<uint64_t>>(
        EpochPermutation(options_.num_samples, options_.seed, epoch));
    cached_epoch_ = epoch;
  }
  return cached_;
}

}  // namespace stoker::dataset
