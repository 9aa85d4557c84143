#include "server/service/plan_prefetch.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace stoker::service {

PlanPrefetcher::PlanPrefetcher(const dataset::Dataset* dataset,
                               dataset::Sampler sampler, uint64_t end,
                               uint64_t depth)
    : dataset_(dataset),
      steps_per_epoch_(sampler.StepsPerEpoch()),
      end_(end),
      depth_(depth),
      sampler_(std::move(sampler)) {}

void PlanPrefetcher::Ahead(uint64_t pos) {
  if (!dataset_->staging() || steps_per_epoch_ == 0) return;
  std::vector<std::vector<uint64_t>> steps;  // In plan order.
  uint64_t from = 0;
  {
    absl::MutexLock lock(&mu_);
    from = std::max(asked_, pos);
    // end_ may be the largest uint64 (an endless stream).
    const uint64_t to = std::min(end_ - 1, pos + depth_);
    for (uint64_t p = from; p <= to && p < end_; ++p) {
      steps.push_back(
          sampler_.StepSamples(p / steps_per_epoch_, p % steps_per_epoch_));
    }
    asked_ = std::max(asked_, to + 1);
  }
  // One Prefetch a batch: the dataset coalesces the records of one call and
  // runs the GETs in the order asked, so the batch built next comes in
  // first instead of its records being spread among those of later ones.
  // The batch being built and the next are urgent (records alone, not the
  // blocks around them: dataset.h); after the first call every batch is
  // asked for kUrgent or more positions ahead of need.
  for (size_t i = 0; i < steps.size(); ++i) {
    dataset_->Prefetch(steps[i], from + i < pos + kUrgent);
  }
}

}  // namespace stoker::service
