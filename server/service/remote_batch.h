// TakeHelperBatch: a batch a helper daemon built (remote_source.h), checked
// against what this daemon would have built at that position and packed
// into this daemon's buffer as FinishBatch packs its own.
//
// Thread-safety: a function over its arguments.
#ifndef STOKER_SERVER_SERVICE_REMOTE_BATCH_H_
#define STOKER_SERVER_SERVICE_REMOTE_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/pipeline/pipeline.h"
#include "server/service/batch.h"
#include "server/service/remote_source.h"

namespace stoker::service {

// How this daemon finishes a helper's uint8 rendering (RemoteBatch::
// rendered): the layout the helper's tensors have (a kRendered bind's,
// BoundPipeline::RenderedSlots), and the bound pipeline whose
// FormatRendered writes each image output into this daemon's layout.
// Borrowed for the call.
struct RenderedFinish {
  const BatchLayout* sent = nullptr;
  const pipeline::BoundPipeline* pipeline = nullptr;
};

// Copies `remote` into `dst` (of `capacity` bytes) and describes it, if it
// is the batch of (epoch, step) whose samples are `ids` (copies `reps`,
// parallel to them; all 0 unless ra_reps > 1) in `layout`: each (id, rep)
// delivered or skipped in order (a helper sends no reps for ra_reps 1), and
// each of the layout's tensors there with its name, dtype and shape (ragged
// values: any row count the samples' room holds). FailedPrecondition naming the
// difference otherwise, and, when `fail_on_corrupt`, for a batch with skipped
// ids (this daemon rebuilds it, so that its own read names the bad record).
//
// A rendered batch is checked against finish->sent instead, and each of its
// image outputs formatted into `dst` rather than copied; FailedPrecondition
// when `finish` is null. The batch op, if any, is the caller's to run.
absl::StatusOr<ReadyBatch> TakeHelperBatch(
    const BatchLayout& layout, uint64_t epoch, uint64_t step,
    const std::vector<uint64_t>& ids, const std::vector<uint32_t>& reps,
    bool fail_on_corrupt, const RemoteBatch& remote, uint8_t* dst,
    size_t capacity, const RenderedFinish* finish = nullptr);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_REMOTE_BATCH_H_
