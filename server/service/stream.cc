#include "server/service/stream.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/service/shared_run.h"

namespace stoker::service {

Stream::Stream(Options options)
    : spec_(std::move(options.spec)),
      catalog_(std::move(options.catalog)),
      dataset_(options.dataset),
      layout_(options.pipeline->slots(), spec_.batch_size),
      steps_per_epoch_(options.sampler->StepsPerEpoch()),
      samples_per_epoch_(options.sampler->SamplesPerEpoch()),
      end_(EndPosition(spec_, steps_per_epoch_)),
      start_(spec_.start_epoch * steps_per_epoch_ + spec_.start_step),
      now_ns_(options.now_ns),
      counters_(std::move(options.counters)),
      counts_(options.count_deliveries ? StreamCounters::Join(counters_)
                                       : std::make_shared<Counts>()),
      tasks_(spec_, dataset_, std::move(options.pipeline), &layout_,
             options.pool, std::move(options.group), options.on_corrupt,
             counters_),
      prefetch_(dataset_->staging() && dataset_->prefetch_batches() > 0
                    ? std::make_unique<PlanPrefetcher>(
                          dataset_, *options.sampler, end_,
                          dataset_->prefetch_batches())
                    : nullptr),
      sampler_(*std::move(options.sampler)),
      next_epoch_(spec_.start_epoch),
      next_step_(spec_.start_step) {
  if (options.placer != nullptr && !IsHelperJob(spec_.job_id)) {
    chunks_.emplace(options.placer, &spec_, *dataset_, &tasks_, &layout_,
                    steps_per_epoch_, start_, end_, options.on_corrupt);
  }
}

Stream::~Stream() {
  std::shared_ptr<SharedRun> run;
  {
    absl::MutexLock lock(&mu_);
    if (run_.has_value()) run = run_->run();
    run_.reset();
  }
  if (run != nullptr) run->Leave(this);
}

void Stream::SetReadyCallback(std::function<void()> callback) {
  absl::MutexLock lock(&callback_mu_);
  callback_ = std::move(callback);
}

void Stream::SetEncoder(std::shared_ptr<const BatchEncoder> encoder) {
  encoder_ = std::move(encoder);
}

bool Stream::AtEndLocked() const {
  return next_epoch_ * steps_per_epoch_ + next_step_ >= end_;
}

void Stream::NextPositionLocked(StreamSlot* slot) {
  slot->epoch = next_epoch_;
  slot->step = next_step_;
  slot->pos = next_epoch_ * steps_per_epoch_ + next_step_;
  dataset::StepEntries entries = sampler_.Step(next_epoch_, next_step_);
  slot->ids = std::move(entries.ids);
  slot->reps = std::move(entries.reps);
  if (++next_step_ == steps_per_epoch_) {
    next_step_ = 0;
    ++next_epoch_;
  }
}

bool Stream::Fill(std::unique_ptr<BatchBuffer> buffer) {
  StreamSlot* slot = nullptr;
  std::shared_ptr<SharedRun> run;
  uint64_t seq = 0;
  uint64_t pos = 0;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_ || !status_.ok() || AtEndLocked()) return false;
    auto s = std::make_unique<StreamSlot>();
    NextPositionLocked(s.get());
    s->buffer = std::move(buffer);
    s->remaining = static_cast<uint32_t>(s->ids.size());
    s->errors.resize(s->ids.size());
    if (run_.has_value()) {
      s->origin = StreamSlot::Origin::kRun;
      run = run_->run();
    } else if (chunks_.has_value() &&
               chunks_->PlaceLocked(s->pos, slots_, weak_from_this(),
                                    counts_.get(), &s->chunk)) {
      s->origin = StreamSlot::Origin::kChunk;
    } else {
      ++building_tasks_;
    }
    slot = s.get();
    pos = s->pos;
    seq = next_seq_++;
    slots_[seq] = std::move(s);
    // A slot of the run or a chunk may change hands (and, once taken, be
    // gone) as soon as the lock is let go: what to do is decided here.
    if (run == nullptr && slot->origin != StreamSlot::Origin::kTasks) {
      return true;
    }
  }
  if (run != nullptr) {
    run->Request(this, seq, pos);
  } else {
    if (prefetch_ != nullptr) prefetch_->Ahead(pos);
    tasks_.Start(shared_from_this(), slot);
  }
  return true;
}

void Stream::StartOnTasks(const std::vector<StreamSlot*>& slots) {
  if (slots.empty()) return;
  const std::shared_ptr<Stream> self = shared_from_this();
  for (StreamSlot* slot : slots) tasks_.Start(self, slot);
}

void Stream::TasksDone(StreamSlot* slot) {
  if (slot->delivered.has_value()) Encode(slot);
  {
    absl::MutexLock lock(&mu_);
    slot->done = true;
    --building_tasks_;
  }
  NotifyReady();
}

void Stream::Encode(StreamSlot* slot) {
  ReadyBatch& ready = *slot->delivered;
  ready.decoded_bytes = ready.bytes;
  if (encoder_ == nullptr) return;
  bool behind = false;
  if (encoder_->adaptive()) {
    absl::MutexLock lock(&mu_);
    for (const auto& [seq, s] : slots_) {
      if (s.get() == slot) break;
      behind |= s->done;
    }
  }
  encoder_->Encode(&ready, slot->buffer->data(), behind, counts_.get());
}

void Stream::NotifyReady() {
  absl::ReaderMutexLock lock(&callback_mu_);
  if (callback_) callback_();
}

std::optional<ReadyBatch> Stream::TakeReady() {
  std::unique_ptr<StreamSlot> slot;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(deliver_seq_);
    if (it == slots_.end() || !it->second->done || !status_.ok()) {
      return std::nullopt;
    }
    slot = std::move(it->second);
    slots_.erase(it);
    ++deliver_seq_;
  }
  if (slot->abandoned) return std::nullopt;
  if (!slot->error.ok()) {
    // The caller is the transport, which checks Done() next: no callback.
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = slot->error;
    return std::nullopt;
  }
  ReadyBatch ready = *std::move(slot->delivered);
  ready.buffer = std::move(slot->buffer);
  CountDelivered(ready);
  if (slot->remote) counts_->Add(Count::kRemoteBatches, 1);
  return ready;
}

void Stream::CountDelivered(const ReadyBatch& ready) {
  counts_->Add(Count::kSamples, static_cast<int64_t>(ready.sample_ids.size()));
  counts_->Add(Count::kBatches, 1);
  counts_->Add(Count::kSkipped, static_cast<int64_t>(ready.skipped_ids.size()));
  counts_->Add(Count::kBytes, static_cast<int64_t>(ready.bytes));
  if (ready.shared) counts_->Add(Count::kSharedBatches, 1);
}

void Stream::AttachRun(std::shared_ptr<SharedRun> run, uint64_t lend_before) {
  absl::MutexLock lock(&mu_);
  run_.emplace(std::move(run), lend_before);
}

void Stream::Deliver(uint64_t seq, std::shared_ptr<const ReadyBatch> batch,
                     bool shared, const absl::Status& error) {
  StreamSlot* slot = nullptr;
  bool lend = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(seq);
    if (it == slots_.end() ||
        it->second->origin != StreamSlot::Origin::kRun) {
      return;
    }
    slot = it->second.get();
    slot->origin = StreamSlot::Origin::kClaimed;
    // Cancel lets go of the run before its last deliveries come: those are
    // copied, and never handed out.
    lend = run_.has_value() && slot->pos < run_->lend_before();
  }
  // Only this call touches the slot until it is marked done.
  if (error.ok()) {
    RunSource::Take(slot, std::move(batch), shared, lend);
  } else {
    slot->error = error;
  }
  {
    absl::MutexLock lock(&mu_);
    slot->done = true;
  }
  NotifyReady();
}

void Stream::DetachFromRun() {
  std::vector<StreamSlot*> waiting;
  std::shared_ptr<SharedRun> run;  // Let go outside the lock.
  {
    absl::MutexLock lock(&mu_);
    if (run_.has_value()) run = run_->run();
    run_.reset();
    for (auto& [seq, slot] : slots_) {
      if (slot->origin != StreamSlot::Origin::kRun) continue;
      slot->origin = StreamSlot::Origin::kTasks;
      ++building_tasks_;
      waiting.push_back(slot.get());
    }
  }
  StartOnTasks(waiting);
}

bool Stream::HasMore() {
  // Read before taking mu_: the pool's lock is never taken inside it.
  const int workers = tasks_.workers();
  absl::MutexLock lock(&mu_);
  return !cancelled_ && status_.ok() && !AtEndLocked() &&
         !BuildingEnoughLocked(workers);
}

bool Stream::BuildingEnoughLocked(int workers) const {
  // A shared run builds elsewhere; a helper's chunk takes its buffers when
  // it is placed, which happens in Fill.
  if (run_.has_value() || chunks_.has_value()) return false;
  const uint64_t samples =
      uint64_t{building_tasks_} * std::max<uint32_t>(1, spec_.batch_size);
  const uint64_t wanted = uint64_t{kBuildAheadPerWorker} *
                          static_cast<uint64_t>(std::max(1, workers));
  return building_tasks_ >= kBuildAhead && samples >= wanted;
}

bool Stream::Done() {
  absl::MutexLock lock(&mu_);
  if (!status_.ok()) return true;
  return AtEndLocked() && slots_.empty();
}

absl::Status Stream::status() {
  absl::MutexLock lock(&mu_);
  return status_;
}

void Stream::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = std::move(status);
  }
  NotifyReady();
}

void Stream::Cancel(absl::Status reason) {
  if (!reason.ok()) {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = std::move(reason);
  }
  cancelled_ = true;
  {
    absl::MutexLock lock(&callback_mu_);
    callback_ = nullptr;
  }
  std::shared_ptr<SharedRun> run;
  std::vector<std::shared_ptr<RemoteChunk>> chunks;
  {
    absl::MutexLock lock(&mu_);
    if (run_.has_value()) run = run_->run();
    run_.reset();
    if (chunks_.has_value()) chunks = chunks_->OpenLocked();
  }
  if (run != nullptr) run->Leave(this);
  for (const std::shared_ptr<RemoteChunk>& chunk : chunks) chunk->Cancel();
}

void Stream::RecordAck(double wait_seconds, double busy_seconds) {
  wait_seconds = std::max(0.0, wait_seconds);
  busy_seconds = std::max(0.0, busy_seconds);
  counts_->Add(Count::kAcks, 1);
  counts_->Add(Count::kWaitNs, static_cast<int64_t>(wait_seconds * 1e9));
  counts_->Add(Count::kBusyNs, static_cast<int64_t>(busy_seconds * 1e9));
  if (!chunks_.has_value()) return;
  // The placer asks how much the consumer waited over the last second.
  const int64_t now = now_ns_();
  absl::MutexLock lock(&mu_);
  chunks_->RecordAckLocked(now, wait_seconds, busy_seconds);
}

void Stream::RecordTransfer(int64_t nanoseconds) {
  counters_->Observe(Stage::kTransfer, nanoseconds);
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
  StreamSlot* slot = nullptr;
  {
    absl::MutexLock lock(&mu_);
    // The chunk runs ahead of Fill by at most the helper's window: wait for
    // the stream to start the batch, i.e. to give it a buffer. The flags
    // checked outside mu_ (the stream's and the chunk's cancellation) are
    // seen within the timeout.
    const std::shared_ptr<RemoteChunk> open = chunks_->FindLocked(chunk);
    if (open == nullptr) {
      return absl::CancelledError("the stream no longer waits for the chunk");
    }
    auto started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled_ || open->cancelled() || !status_.ok() ||
             slots_.count(seq) != 0 || chunks_->FindLocked(chunk) == nullptr ||
             AtEndLocked();
    };
    while (!mu_.AwaitWithTimeout(absl::Condition(&started),
                                 absl::Milliseconds(50))) {
    }
    if (cancelled_ || open->cancelled() || !status_.ok()) {
      return absl::CancelledError("the stream or the chunk ended");
    }
    auto found = slots_.find(seq);
    if (found == slots_.end() ||
        found->second->origin != StreamSlot::Origin::kChunk ||
        found->second->chunk != chunk) {
      return absl::CancelledError(
          absl::StrCat("the stream no longer waits for position ", pos,
                       " from chunk ", chunk));
    }
    slot = found->second.get();
    slot->origin = StreamSlot::Origin::kClaimed;
  }
  // Only this call touches the slot until it is marked done or given back.
  const int64_t start = NowNs();
  absl::StatusOr<ReadyBatch> ready = chunks_->Copy(remote, slot);
  report->copy_ns += NowNs() - start;
  if (!ready.ok()) {
    absl::MutexLock lock(&mu_);
    // ChunkEnded, which the chunk calls next, builds it here.
    slot->origin = StreamSlot::Origin::kChunk;
    return ready.status();
  }
  slot->delivered = *std::move(ready);
  slot->remote = true;
  Encode(slot);
  {
    absl::MutexLock lock(&mu_);
    slot->done = true;
    if (seq == deliver_seq_) {
      for (const auto& [later, other] : slots_) {
        if (later > seq && other->done) report->late = true;
      }
    }
  }
  NotifyReady();
  return absl::OkStatus();
}

void Stream::ChunkEnded(uint64_t chunk) {
  std::vector<StreamSlot*> waiting;
  {
    absl::MutexLock lock(&mu_);
    chunks_->EndLocked(chunk);
    for (auto& [seq, slot] : slots_) {
      if (slot->origin != StreamSlot::Origin::kChunk || slot->chunk != chunk) {
        continue;
      }
      slot->origin = StreamSlot::Origin::kTasks;
      ++building_tasks_;
      waiting.push_back(slot.get());
    }
  }
  // The chunk writes nothing after this call, so these are built once.
  StartOnTasks(waiting);
  counts_->Add(Count::kRemoteRebuilt, static_cast<int64_t>(waiting.size()));
}

StreamStats Stream::stats() const {
  StreamStats s;
  s.counts = counts_->Read();
  absl::MutexLock lock(&mu_);
  s.sharing = run_.has_value();
  for (const auto& [seq, slot] : slots_) {
    (slot->done ? s.queued : s.building) += 1;
  }
  return s;
}

}  // namespace stoker::service
