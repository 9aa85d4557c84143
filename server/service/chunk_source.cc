#include "server/service/chunk_source.h"

#include <algorithm>
#include <utility>

#include "server/service/remote_batch.h"

namespace stoker::service {

ChunkSource::ChunkSource(ChunkPlacer* placer, const StreamSpec* spec,
                         const dataset::Dataset& dataset,
                         const TaskSource* tasks, const BatchLayout* layout,
                         uint64_t steps_per_epoch, uint64_t start,
                         uint64_t end, OnCorrupt on_corrupt)
    : placer_(placer),
      spec_(spec),
      tasks_(tasks),
      layout_(layout),
      steps_per_epoch_(steps_per_epoch),
      start_(start),
      end_(end),
      fail_on_corrupt_(on_corrupt == OnCorrupt::kFail),
      content_digest_(dataset.ContentDigest().value_or(std::string())),
      rendered_layout_(tasks->pipeline().can_finish_rendered()
                           ? std::make_optional<BatchLayout>(
                                 tasks->pipeline().RenderedSlots(),
                                 spec->batch_size)
                           : std::nullopt) {}

bool ChunkSource::PlaceLocked(
    uint64_t pos, const std::map<uint64_t, std::unique_ptr<StreamSlot>>& slots,
    std::weak_ptr<ChunkSink> sink, Counts* counts, uint64_t* chunk) {
  if (pos >= chunk_end_) {
    const uint64_t steps = placer_->chunk_steps(spec_->prefetch);
    // Chunks start every `steps` positions from the stream's start, so a
    // chunk that ended early is not followed by a misaligned one.
    if ((pos - start_) % steps != 0) return false;
    ChunkRequest request;
    request.spec = spec_;
    request.content_digest = content_digest_;
    request.steps_per_epoch = steps_per_epoch_;
    request.begin = pos;
    request.end = std::min(end_, pos + steps);
    request.can_finish_rendered = rendered_layout_.has_value();
    double wait = 0, busy = 0;
    for (const AckFigures& a : recent_acks_) {
      wait += a.wait_seconds;
      busy += a.busy_seconds;
    }
    request.stall_share = wait + busy > 0 ? wait / (wait + busy) : 0;
    request.starved = true;
    for (const auto& [seq, slot] : slots) {
      if (slot->done) request.starved = false;
    }
    const uint64_t end = request.end;
    std::shared_ptr<RemoteChunk> placed =
        placer_->Place(request, std::move(sink));
    if (placed == nullptr) return false;
    chunks_[pos] = std::move(placed);
    chunk_begin_ = pos;
    chunk_end_ = end;
  }
  if (chunks_.count(chunk_begin_) == 0) {  // Ended early: build it here.
    counts->Add(Count::kRemoteRebuilt, 1);
    return false;
  }
  *chunk = chunk_begin_;
  return true;
}

void ChunkSource::RecordAckLocked(int64_t now_ns, double wait_seconds,
                                  double busy_seconds) {
  recent_acks_.push_back({now_ns, wait_seconds, busy_seconds});
  while (now_ns - recent_acks_.front().at_ns > 1'000'000'000) {
    recent_acks_.pop_front();
  }
}

std::shared_ptr<RemoteChunk> ChunkSource::FindLocked(uint64_t chunk) const {
  auto it = chunks_.find(chunk);
  return it == chunks_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<RemoteChunk>> ChunkSource::OpenLocked() const {
  std::vector<std::shared_ptr<RemoteChunk>> out;
  for (const auto& [begin, chunk] : chunks_) out.push_back(chunk);
  return out;
}

absl::StatusOr<ReadyBatch> ChunkSource::Copy(const RemoteBatch& remote,
                                             StreamSlot* slot) const {
  slot->buffer->BeforeWrite();
  const RenderedFinish finish{
      rendered_layout_.has_value() ? &*rendered_layout_ : nullptr,
      &tasks_->pipeline()};
  absl::StatusOr<ReadyBatch> ready = TakeHelperBatch(
      *layout_, slot->epoch, slot->step, slot->ids, slot->reps,
      fail_on_corrupt_, remote, slot->buffer->data(), slot->buffer->capacity(),
      rendered_layout_.has_value() ? &finish : nullptr);
  if (ready.ok() && remote.rendered) tasks_->RunBatchOp(slot, *ready);
  return ready;
}

}  // namespace stoker::service
