// Stream::Building: a batch a Stream is building, and where it comes from.
// Internal to server/service/: stream.cc builds batches on the workers,
// stream_remote.cc has helpers build them.
#ifndef STOKER_SERVER_SERVICE_STREAM_BUILDING_H_
#define STOKER_SERVER_SERVICE_STREAM_BUILDING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "server/service/batch.h"
#include "server/service/stream.h"

namespace stoker::service {

// A batch being built. Each of its samples is written by exactly one task;
// the task that finishes last marks the batch done. Or, for a stream on a
// shared run, the run delivers it whole; or a helper's chunk does.
struct Stream::Building {
  enum class Source { kTasks, kRun, kRemote, kDelivering };
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> ids;
  std::vector<uint32_t> reps;  // Parallel to ids: which copy (ra_reps).
  std::unique_ptr<BatchBuffer> buffer;
  std::atomic<uint32_t> remaining{0};
  std::vector<absl::Status> errors;  // Slot i written only by sample i's task.
  bool done = false;                 // Guarded by the stream's mu_.
  Source source = Source::kTasks;    // Guarded by the stream's mu_.
  uint64_t chunk = 0;   // kRemote: the chunk's id. Guarded by the stream's mu_.
  bool remote = false;  // Delivered by a helper.
  // Set when the run or a helper delivered it, or the worker that wrote its
  // last sample finished it: the batch's description (its buffer is
  // `buffer`), or the error that ends the stream there.
  std::optional<ReadyBatch> delivered;
  absl::Status run_error;
  // Its samples were not run (the stream was cancelled): never delivered.
  bool abandoned = false;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_BUILDING_H_
