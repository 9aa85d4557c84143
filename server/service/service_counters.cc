#include "server/service/service_counters.h"

namespace stoker::service {

std::vector<DatasetHealth> DatasetHealthOf(const Catalog& catalog) {
  std::vector<DatasetHealth> out;
  for (const auto& [name, ds] : catalog.datasets()) {
    out.push_back({name, ds->Damage(),
                   ds->has_source() ? std::make_optional(ds->remote_stats())
                                    : std::nullopt});
  }
  return out;
}

std::shared_ptr<StreamCounters> ServiceCounters::For(const StreamSpec& spec) {
  CounterKey key{spec.dataset, spec.pipeline, spec.job_id, spec.transport};
  absl::MutexLock lock(&mu_);
  if (counters_.size() >= kMaxCounterKeys && counters_.count(key) == 0) {
    key.job = "_other";
  }
  auto& slot = counters_[key];
  if (slot == nullptr) slot = std::make_shared<StreamCounters>();
  return slot;
}

std::vector<std::pair<CounterKey, std::shared_ptr<const StreamCounters>>>
ServiceCounters::All() const {
  absl::MutexLock lock(&mu_);
  return {counters_.begin(), counters_.end()};
}

void ServiceCounters::RecordError(absl::StatusCode code) {
  const size_t i = static_cast<size_t>(code);
  absl::MutexLock lock(&mu_);
  if (i < errors_.size()) ++errors_[i];
}

std::array<int64_t, 17> ServiceCounters::Errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

void ServiceCounters::RecordShareFallback() {
  absl::MutexLock lock(&mu_);
  ++share_fallbacks_;
}

uint64_t ServiceCounters::share_fallbacks() const {
  absl::MutexLock lock(&mu_);
  return share_fallbacks_;
}

}  // namespace stoker::service
