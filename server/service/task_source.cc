#include "server/service/task_source.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/base/clock.h"
#include "server/pipeline/passthrough.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::service {

TaskSource::TaskSource(const StreamSpec& spec, const dataset::Dataset* dataset,
                       std::shared_ptr<const pipeline::BoundPipeline> pipeline,
                       const BatchLayout* layout, pipeline::WorkerPool* pool,
                       std::shared_ptr<PoolGroup> group, OnCorrupt on_corrupt,
                       std::shared_ptr<StreamCounters> counters)
    : seed_(spec.seed),
      rank_(spec.rank),
      with_reps_(spec.ra_reps > 1),
      dataset_(dataset),
      pipeline_(std::move(pipeline)),
      layout_(layout),
      pool_(pool),
      group_(std::move(group)),
      on_corrupt_(on_corrupt),
      counters_(std::move(counters)) {}

void TaskSource::Start(std::shared_ptr<SlotOwner> owner,
                       StreamSlot* slot) const {
  slot->buffer->BeforeWrite();
  const uint32_t n = static_cast<uint32_t>(slot->ids.size());
  for (uint32_t i = 0; i < n; ++i) {
    pool_->Submit(group_->id(), [owner, this, slot, i] {
      RunSample(*owner, slot, i);
    });
  }
}

void TaskSource::RunSample(SlotOwner& owner, StreamSlot* slot,
                           uint32_t index) const {
  if (!owner.cancelled()) {
    const uint64_t id = slot->ids[index];
    pipeline::SampleRng rng(seed_, slot->epoch, id, slot->reps[index]);
    const size_t num_tensors = layout_->per_sample().size();
    absl::InlinedVector<uint8_t*, 4> dst(num_tensors);
    for (size_t t = 0; t < num_tensors; ++t) {
      dst[t] = layout_->SamplePtr(slot->buffer->data(), t, index);
    }
    pipeline::StageTimes times;
    int64_t run_ns = 0;
    const int64_t start = NowNs();
    dataset::ReadInfo read;
    absl::Status status = dataset_->Read(
        id, [&](const dataset::RecordView& record) -> absl::Status {
          const int64_t run_start = NowNs();
          absl::Status s = pipeline_->Run(
              absl::MakeConstSpan(record.fields.data(), record.fields.size()),
              rng, absl::MakeConstSpan(dst), &times);
          run_ns = NowNs() - run_start;
          return s;
        },
        &read);
    if (read.from_source) {
      Counts& counts = owner.counts();
      counts.Add(Count::kSourceRecords, 1);
      counts.Add(Count::kSourceBytes, static_cast<int64_t>(read.bytes));
      counts.Add(Count::kSourceWaitNs, read.wait_ns);
    }
    // Read names the dataset, shard file and key (the sample id) once.
    if (!status.ok()) slot->errors[index] = std::move(status);
    counters_->Observe(Stage::kRead, NowNs() - start - run_ns);
    counters_->Observe(Stage::kDecode, times.decode_ns);
    counters_->Observe(Stage::kAugment, times.augment_ns);
    counters_->Observe(Stage::kCollate, times.collate_ns);
  }
  if (slot->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last sample: only this call touches the slot until TasksDone.
  if (owner.cancelled()) {
    slot->abandoned = true;
  } else {
    FinishBatchOf(slot);
  }
  owner.TasksDone(slot);
}

void TaskSource::FinishBatchOf(StreamSlot* slot) const {
  ReadyBatch ready;
  ready.epoch = slot->epoch;
  ready.step = slot->step;
  std::vector<uint32_t> kept;
  for (uint32_t i = 0; i < slot->ids.size(); ++i) {
    const absl::Status& error = slot->errors[i];
    if (error.ok()) {
      kept.push_back(i);
      ready.sample_ids.push_back(slot->ids[i]);
      if (with_reps_) ready.sample_reps.push_back(slot->reps[i]);
      continue;
    }
    // A ragged_limit's overflow policy decides for its own samples. A
    // damaged shard ends the stream even under kSkip: the file changed
    // under the daemon, and no read of it can be trusted. So does a
    // FailedPrecondition (an image format this build cannot decode), or a
    // source that failed to deliver a record of a shard not staged yet:
    // the sample is fine, and skipping it would lose it.
    const std::optional<pipeline::RaggedOverflow> overflow =
        pipeline::RaggedOverflowOf(error);
    const bool skip = overflow.has_value()
                          ? *overflow == pipeline::RaggedOverflow::kSkip
                          : on_corrupt_ != OnCorrupt::kFail &&
                                !dataset::IsShardDamage(error) &&
                                !dataset::IsSourceFailure(error) &&
                                !absl::IsFailedPrecondition(error);
    if (!skip) {
      slot->error = error;
      return;
    }
    ready.skipped_ids.push_back(slot->ids[i]);
    if (with_reps_) ready.skipped_reps.push_back(slot->reps[i]);
  }
  ready.tensors =
      FinishBatch(*layout_, slot->buffer->data(), kept, &ready.bytes);
  RunBatchOp(slot, ready);
  if (!slot->error.ok()) return;
  ready.decoded_bytes = ready.bytes;
  slot->delivered = std::move(ready);
}

void TaskSource::RunBatchOp(StreamSlot* slot, const ReadyBatch& ready) const {
  if (!pipeline_->has_batch_op() || ready.sample_ids.empty()) return;
  // The batch stage: after collation, with the batch's own generator, so
  // the batch is a function of its position alone.
  const int64_t start = NowNs();
  absl::InlinedVector<uint8_t*, 4> tensors;
  for (const BatchTensor& t : ready.tensors) {
    tensors.push_back(slot->buffer->data() + t.offset);
  }
  pipeline::SampleRng rng =
      pipeline::SampleRng::ForBatch(seed_, slot->epoch, slot->step, rank_);
  absl::Status status =
      pipeline_->RunBatch(absl::MakeConstSpan(tensors),
                          static_cast<uint32_t>(ready.sample_ids.size()), rng);
  counters_->Observe(Stage::kAugment, NowNs() - start);
  if (!status.ok()) {
    slot->error =
        absl::Status(status.code(),
                     absl::StrCat("batch op at epoch ", slot->epoch, " step ",
                                  slot->step, ": ", status.message()));
  }
}

}  // namespace stoker::service
