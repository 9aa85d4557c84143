// The part of Stream that has helpers build chunks of its batches
// (remote_source.h): placing a chunk at a chunk boundary, taking a helper's
// batch into the stream's buffer, and building here what a chunk that
// ended early did not deliver.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/service/remote_batch.h"
#include "server/service/stream.h"
#include "server/service/stream_building.h"

namespace stoker::service {
void Stream::PlaceLocked(Building* batch, uint64_t pos) {
  if (pos >= chunk_end_) {
    const uint64_t steps = placer_->chunk_steps(spec_.prefetch);
    // Chunks start every `steps` positions from the stream's start, so a
    // chunk that ended early is not followed by a misaligned one.
    if ((pos - start_) % steps != 0) return;
    ChunkRequest request;
    request.spec = &spec_;
    request.content_digest = content_digest_;
    request.steps_per_epoch = steps_per_epoch_;
    request.begin = pos;
    request.end = std::min(end_, pos + steps);
    request.can_finish_rendered = rendered_layout_.has_value();
    NeedLocked(&request);
    const uint64_t end = request.end;
    std::shared_ptr<RemoteChunk> chunk =
        placer_->Place(request, std::weak_ptr<ChunkSink>(shared_from_this()));
    if (chunk == nullptr) return;
    chunks_[pos] = std::move(chunk);
    chunk_begin_ = pos;
    chunk_end_ = end;
  }
  if (chunks_.count(chunk_begin_) == 0) {  // Ended early: build it here.
    counts_->Add(Count::kRemoteRebuilt, 1);
    return;
  }
  batch->source = Building::Source::kRemote;
  batch->chunk = chunk_begin_;
}

void Stream::NeedLocked(ChunkRequest* request) const {
  double wait = 0, busy = 0;
  for (const AckFigures& a : recent_acks_) {
    wait += a.wait_seconds;
    busy += a.busy_seconds;
  }
  request->stall_share = wait + busy > 0 ? wait / (wait + busy) : 0;
  request->starved = true;
  for (const auto& [seq, b] : building_) {
    if (b->done) request->starved = false;
  }
}

absl::Status Stream::TakeRemote(uint64_t chunk, uint64_t pos,
                                const RemoteBatch& remote, TakeReport* report) {
  if (!remote.skipped_ids.empty()) {
    // A helper never decides that a sample is lost: one it skipped (a lower
    // limit than this node's, another decoder) may well be good here. The
    // chunk ends, and this batch and the rest of the chunk are built here,
    // where this node's own limits decide.
    return absl::FailedPreconditionError(absl::StrCat(
        "the helper skipped ", remote.skipped_ids.size(), " samples (id ",
        remote.skipped_ids[0], " first) of position ", pos,
        ": its limits or data differ from this node's; built here instead"));
  }
  const uint64_t seq = pos - start_;
  Building* b = nullptr;
  {
    absl::MutexLock lock(&mu_);
    // The chunk runs ahead of Fill by at most the helper's window: wait for
    // the stream to start the batch, i.e. to give it a buffer. The flags
    // checked outside mu_ (the stream's and the chunk's cancellation) are
    // seen within the timeout.
    auto it = chunks_.find(chunk);
    if (it == chunks_.end()) {
      return absl::CancelledError("the stream no longer waits for the chunk");
    }
    const std::shared_ptr<RemoteChunk> remote_chunk = it->second;
    auto started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled_ || remote_chunk->cancelled() || !status_.ok() ||
             building_.count(seq) != 0 || chunks_.count(chunk) == 0 ||
             AtEndLocked();
    };
    while (!mu_.AwaitWithTimeout(absl::Condition(&started),
                                 absl::Milliseconds(50))) {
    }
    if (cancelled_ || remote_chunk->cancelled() || !status_.ok()) {
      return absl::CancelledError("the stream or the chunk ended");
    }
    auto found = building_.find(seq);
    if (found == building_.end() ||
        found->second->source != Building::Source::kRemote ||
        found->second->chunk != chunk) {
      return absl::CancelledError(
          absl::StrCat("the stream no longer waits for position ", pos,
                       " from chunk ", chunk));
    }
    b = found->second.get();
    b->source = Building::Source::kDelivering;
  }
  // Only this call touches b until it is marked done or given back.
  const int64_t start = NowNs();
  b->buffer->BeforeWrite();
  const RenderedFinish finish{
      rendered_layout_.has_value() ? &*rendered_layout_ : nullptr,
      pipeline_.get()};
  absl::StatusOr<ReadyBatch> ready = TakeHelperBatch(
      layout_, b->epoch, b->step, b->ids, b->reps,
      on_corrupt_ == OnCorrupt::kFail, remote, b->buffer->data(),
      b->buffer->capacity(), rendered_layout_.has_value() ? &finish : nullptr);
  if (ready.ok() && remote.rendered) RunBatchOp(b, *ready);
  report->copy_ns += NowNs() - start;
  if (!ready.ok()) {
    absl::MutexLock lock(&mu_);
    // ChunkEnded, which the chunk calls next, builds it here.
    b->source = Building::Source::kRemote;
    return ready.status();
  }
  b->delivered = *std::move(ready);
  b->remote = true;
  Encode(b);
  {
    absl::MutexLock lock(&mu_);
    b->done = true;
    if (seq == deliver_seq_) {
      for (const auto& [later, other] : building_) {
        if (later > seq && other->done) report->late = true;
      }
    }
  }
  NotifyReady();
  return absl::OkStatus();
}

void Stream::ChunkEnded(uint64_t chunk) {
  std::vector<Building*> waiting;
  {
    absl::MutexLock lock(&mu_);
    chunks_.erase(chunk);
    for (auto& [seq, b] : building_) {
      if (b->source != Building::Source::kRemote || b->chunk != chunk) {
        continue;
      }
      b->source = Building::Source::kTasks;
      waiting.push_back(b.get());
    }
  }
  // The chunk writes nothing after this call, so these are built once.
  for (Building* b : waiting) SubmitSamples(b);
  counts_->Add(Count::kRemoteRebuilt, static_cast<int64_t>(waiting.size()));
}

}  // namespace stoker::service
