#include "server/remote/placement.h"

namespace stoker::remote {

bool PlacementPolicy::Sample(absl::Time now, bool saturated) {
  const bool was = remote_;
  if (saturated) {
    idle_since_ = absl::InfiniteFuture();
    if (saturated_since_ == absl::InfiniteFuture()) saturated_since_ = now;
    if (now - saturated_since_ >= options_.saturated_for) remote_ = true;
  } else {
    saturated_since_ = absl::InfiniteFuture();
    if (idle_since_ == absl::InfiniteFuture()) idle_since_ = now;
    if (now - idle_since_ >= options_.idle_for) remote_ = false;
  }
  return remote_ != was;
}

}  // namespace stoker::remote
