// StreamSlot: one batch of a Stream's window (stream.h), from the moment
// the stream starts it (Fill hands it a buffer) until the consumer takes it
// (TakeReady), and which source fills it. Internal to server/service/.
//
// Thread rules: `origin`, `chunk` and `done` are guarded by the owning
// stream's lock. The rest belongs to whoever fills the slot, one at a time:
// its tasks (origin kTasks; sample i writes only errors[i] and its place in
// the buffer, and the task that finishes the last sample the rest), or the
// one delivery that claimed it (kClaimed: the run's Deliver, a helper's
// TakeRemote). The stream reads them once `done` is set.
#ifndef STOKER_SERVER_SERVICE_STREAM_SLOT_H_
#define STOKER_SERVER_SERVICE_STREAM_SLOT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "server/service/batch.h"

namespace stoker::service {

struct StreamSlot {
  enum class Origin {
    kTasks,    // Built on the stream's own tasks (TaskSource).
    kRun,      // Asked of its shared run, which delivers it (RunSource).
    kChunk,    // A helper's chunk hands it over (ChunkSource).
    kClaimed,  // A delivery is writing it, outside the stream's lock.
  };

  uint64_t epoch = 0;
  uint64_t step = 0;
  uint64_t pos = 0;  // epoch * steps_per_epoch + step.
  std::vector<uint64_t> ids;
  std::vector<uint32_t> reps;  // Parallel to ids: which copy (ra_reps).
  std::unique_ptr<BatchBuffer> buffer;
  std::atomic<uint32_t> remaining{0};  // Samples whose task has not run.
  std::vector<absl::Status> errors;    // errors[i]: sample i's task's.
  Origin origin = Origin::kTasks;
  uint64_t chunk = 0;  // kChunk: the chunk's id (its first position).
  bool done = false;
  bool remote = false;  // A helper built it.
  // Once filled: the batch's description (its bytes are in `buffer`), or
  // the error that ends the stream at this batch.
  std::optional<ReadyBatch> delivered;
  absl::Status error;
  // Its samples were not run (the stream was cancelled): never handed out.
  bool abandoned = false;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_SLOT_H_
