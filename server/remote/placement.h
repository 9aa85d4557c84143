// PlacementPolicy: when a node sends chunks of its streams to helpers, as
// Pecan's AutoPlacement does (docs/remote-design.md §1.1): local workers
// first; chunks go remote only while the node's own worker pool is the
// bottleneck, and stop again once it is not.
//
// The pool is sampled over time (Sample): it is saturated while it has more
// runnable tasks than active workers. Remote placement turns on once the
// pool has been saturated for `saturated_for` without a break, and off once
// it has not been for `idle_for` (hysteresis: helpers taking work drains
// the local queue, which must not flip placement at every chunk). While
// it is on, a chunk goes remote only for a stream that needs help: its
// consumer waited for data more than `stall_share` of the last second, or
// no finished batch waits in its window.
//
// A value type with no clock of its own: time is passed in, so every rule
// is testable without threads. Thread-compatible.
#ifndef STOKER_SERVER_REMOTE_PLACEMENT_H_
#define STOKER_SERVER_REMOTE_PLACEMENT_H_

#include "absl/time/time.h"
#include "server/service/remote_source.h"

namespace stoker::remote {

class PlacementPolicy {
 public:
  struct Options {
    absl::Duration saturated_for = absl::Milliseconds(200);
    absl::Duration idle_for = absl::Seconds(1);
    double stall_share = 0.02;
  };

  explicit PlacementPolicy(Options options) : options_(options) {}

  // The pool's state at `now` (non-decreasing between calls). Returns true
  // when placement turned on or off with this sample.
  bool Sample(absl::Time now, bool saturated);

  // Whether chunks go remote now.
  bool remote() const { return remote_; }

  // Whether the chunk `request` offers goes to a helper.
  bool Wants(const service::ChunkRequest& request) const {
    return remote_ && (request.starved ||
                       request.stall_share > options_.stall_share);
  }

 private:
  const Options options_;
  bool remote_ = false;
  // Since when the pool has been saturated, or not, without a break.
  absl::Time saturated_since_ = absl::InfiniteFuture();
  absl::Time idle_since_ = absl::InfiniteFuture();
};

}  // namespace stoker::remote

#endif  // STOKER_SERVER_REMOTE_PLACEMENT_H_
