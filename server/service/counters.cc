#include "server/service/counters.h"

namespace stoker::service {
namespace {

constexpr bool InOrder() {
  for (int i = 0; i < kNumCounts; ++i) {
    if (static_cast<int>(kCounts[i].count) != i) return false;
  }
  return true;
}
static_assert(InOrder(), "kCounts lists each Count at its own index");

}  // namespace

CountValues Counts::Read() const {
  CountValues out;
  for (int i = 0; i < kNumCounts; ++i) {
    out.v[i] = v_[i].load(std::memory_order_relaxed);
  }
  return out;
}

std::shared_ptr<Counts> StreamCounters::Join(
    std::shared_ptr<StreamCounters> set) {
  auto* counts = new Counts();
  {
    absl::MutexLock lock(&set->mu_);
    set->open_.insert(counts);
  }
  return std::shared_ptr<Counts>(counts, [set](Counts* c) {
    set->Fold(c);
    delete c;
  });
}

void StreamCounters::Fold(const Counts* counts) {
  const CountValues last = counts->Read();
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < kNumCounts; ++i) folded_.v[i] += last.v[i];
  open_.erase(counts);
}

CountValues StreamCounters::Read() const {
  absl::MutexLock lock(&mu_);
  CountValues out = folded_;
  for (const Counts* c : open_) {
    const CountValues now = c->Read();
    for (int i = 0; i < kNumCounts; ++i) out.v[i] += now.v[i];
  }
  return out;
}

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kRead:
      return "read";
    case Stage::kDecode:
      return "decode";
    case Stage::kAugment:
      return "augment";
    case Stage::kCollate:
      return "collate";
    case Stage::kTransfer:
      return "transfer";
  }
  return "unknown";
}

}  // namespace stoker::service
