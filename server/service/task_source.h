// TaskSource: builds a stream's batches on its own tasks, on the shared
// worker pool. Each sample of a batch is one pool task that reads its
// record, runs the pipeline with a generator seeded by (seed, epoch, sample
// id, copy), and writes its outputs straight to its place in the slot's
// buffer. The task that runs the batch's last sample finishes the batch: it
// decides which samples are kept (or the error that ends the stream there),
// collates them (FinishBatch), then runs the pipeline's batch op (mixup,
// cutmix) with a generator seeded by (seed, epoch, step, rank). So a batch
// depends only on the request and its position, never on worker count or
// timing.
//
// A sample that cannot be read or decoded is left out of its batch and
// listed in its skipped ids (OnCorrupt::kSkip), or ends the stream with its
// status after the batches before it (kFail). A sample on a damaged shard
// (dataset::IsShardDamage), whose source failed to deliver it while its
// shard is staged (dataset::IsSourceFailure), or in an image format this
// build cannot decode (FailedPrecondition), ends it under either setting; a ragged_limit's
// overflow policy decides for its own samples.
//
// Thread-safe: constant after construction. A slot it builds is touched only
// by its tasks until the last one hands it back (SlotOwner::TasksDone).
#ifndef STOKER_SERVER_SERVICE_TASK_SOURCE_H_
#define STOKER_SERVER_SERVICE_TASK_SOURCE_H_

#include <cstdint>
#include <memory>

#include "server/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/batch.h"
#include "server/service/counters.h"
#include "server/service/stream_slot.h"
#include "server/service/stream_spec.h"

namespace stoker::service {

// The stream whose slots a TaskSource builds (the Stream).
class SlotOwner {
 public:
  virtual ~SlotOwner() = default;
  // Tasks not yet run skip their work once this is true.
  virtual bool cancelled() const = 0;
  // The stream's own counts (reads from a staging dataset's source).
  virtual Counts& counts() = 0;
  // The last task of `slot` ran: it is filled (delivered or error), or
  // abandoned. Runs on that task's worker.
  virtual void TasksDone(StreamSlot* slot) = 0;
};

class TaskSource {
 public:
  // `dataset`, `pool` and `layout` outlive the source (the stream keeps the
  // catalog that owns the dataset, and the layout).
  TaskSource(const StreamSpec& spec, const dataset::Dataset* dataset,
             std::shared_ptr<const pipeline::BoundPipeline> pipeline,
             const BatchLayout* layout, pipeline::WorkerPool* pool,
             std::shared_ptr<PoolGroup> group, OnCorrupt on_corrupt,
             std::shared_ptr<StreamCounters> counters);

  // Submits one task per sample of `slot` (ids, reps and buffer set); each
  // holds `owner` alive, and the last calls owner->TasksDone(slot).
  void Start(std::shared_ptr<SlotOwner> owner, StreamSlot* slot) const;

  // Runs the pipeline's batch op on `ready`, collated in slot->buffer; sets
  // slot->error when it fails. A helper's rendered batch needs it too.
  void RunBatchOp(StreamSlot* slot, const ReadyBatch& ready) const;

  const pipeline::BoundPipeline& pipeline() const { return *pipeline_; }
  const std::shared_ptr<const pipeline::BoundPipeline>& shared_pipeline()
      const {
    return pipeline_;
  }
  // Workers that take tasks now (WorkerPool::active_threads).
  int workers() const { return pool_->active_threads(); }

 private:
  void RunSample(SlotOwner& owner, StreamSlot* slot, uint32_t index) const;
  // Decides which samples are kept, collates them and runs the batch op.
  void FinishBatchOf(StreamSlot* slot) const;

  const uint64_t seed_;
  const uint32_t rank_;
  const bool with_reps_;  // ra_reps > 1: batches list each entry's copy.
  const dataset::Dataset* const dataset_;
  const std::shared_ptr<const pipeline::BoundPipeline> pipeline_;
  const BatchLayout* const layout_;
  pipeline::WorkerPool* const pool_;
  const std::shared_ptr<PoolGroup> group_;
  const OnCorrupt on_corrupt_;
  const std::shared_ptr<StreamCounters> counters_;  // Stage latencies.
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_TASK_SOURCE_H_
