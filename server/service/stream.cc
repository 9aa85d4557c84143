#include "server/service/stream.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "proto/payload_codec.h"
#include "server/base/clock.h"
#include "server/pipeline/passthrough.h"
#include "server/pipeline/sample_rng.h"
#include "server/service/shared_run.h"
#include "server/service/stream_building.h"

namespace stoker::service {
namespace {

// a * b, or the largest uint64 where that overflows.
uint64_t SaturatingProduct(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product)
             ? std::numeric_limits<uint64_t>::max()
             : product;
}

}  // namespace

bool IsHelperJob(std::string_view job_id) {
  return job_id.substr(0, 7) == "helper:";
}

uint64_t EndPosition(const StreamSpec& spec, uint64_t steps_per_epoch) {
  uint64_t end = spec.epochs == 0
                     ? std::numeric_limits<uint64_t>::max()
                     : SaturatingProduct(spec.epochs, steps_per_epoch);
  if (spec.end_epoch != 0 || spec.end_step != 0) {
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    const uint64_t epochs = SaturatingProduct(spec.end_epoch, steps_per_epoch);
    const uint64_t until =
        epochs > kMax - spec.end_step ? kMax : epochs + spec.end_step;
    end = std::min(end, until);
  }
  return end;
}

Stream::Stream(Options options)
    : spec_(std::move(options.spec)),
      catalog_(std::move(options.catalog)),
      dataset_(options.dataset),
      pipeline_(std::move(options.pipeline)),
      layout_(pipeline_->slots(), spec_.batch_size),
      pool_(options.pool),
      group_(std::move(options.group)),
      on_corrupt_(options.on_corrupt),
      steps_per_epoch_(options.sampler->StepsPerEpoch()),
      samples_per_epoch_(options.sampler->SamplesPerEpoch()),
      end_(EndPosition(spec_, steps_per_epoch_)),
      start_(spec_.start_epoch * steps_per_epoch_ + spec_.start_step),
      placer_(IsHelperJob(spec_.job_id) ? nullptr : options.placer),
      content_digest_(placer_ != nullptr
                          ? dataset_->ContentDigest().value_or(std::string())
                          : std::string()),
      rendered_layout_(placer_ != nullptr && pipeline_->can_finish_rendered()
                           ? std::make_optional<BatchLayout>(
                                 pipeline_->RenderedSlots(), spec_.batch_size)
                           : std::nullopt),
      prefetch_(dataset_->staging() ? std::make_unique<PlanPrefetcher>(
                                          dataset_, *options.sampler, end_)
                                    : nullptr),
      counters_(std::move(options.counters)),
      counts_(options.count_deliveries ? StreamCounters::Join(counters_)
                                       : std::make_shared<Counts>()),
      sampler_(*std::move(options.sampler)),
      next_epoch_(spec_.start_epoch),
      next_step_(spec_.start_step) {}

Stream::~Stream() {
  std::shared_ptr<SharedRun> run;
  {
    absl::MutexLock lock(&mu_);
    run = std::move(run_);
  }
  if (run != nullptr) run->Leave(this);
}

void Stream::SetReadyCallback(std::function<void()> callback) {
  absl::MutexLock lock(&callback_mu_);
  callback_ = std::move(callback);
}

bool Stream::AtEndLocked() const {
  return next_epoch_ * steps_per_epoch_ + next_step_ >= end_;
}

bool Stream::Fill(std::unique_ptr<BatchBuffer> buffer) {
  Building* batch = nullptr;
  std::shared_ptr<SharedRun> run;
  uint64_t seq = 0;
  uint64_t pos = 0;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_ || !status_.ok() || AtEndLocked()) return false;
    auto b = std::make_unique<Building>();
    b->epoch = next_epoch_;
    b->step = next_step_;
    dataset::StepEntries entries = sampler_.Step(next_epoch_, next_step_);
    b->ids = std::move(entries.ids);
    b->reps = std::move(entries.reps);
    b->buffer = std::move(buffer);
    b->remaining = static_cast<uint32_t>(b->ids.size());
    b->errors.resize(b->ids.size());
    pos = next_epoch_ * steps_per_epoch_ + next_step_;
    if (run_ != nullptr) {
      b->source = Building::Source::kRun;
      run = run_;
    } else if (placer_ != nullptr) {
      PlaceLocked(b.get(), pos);
    }
    if (++next_step_ == steps_per_epoch_) {
      next_step_ = 0;
      ++next_epoch_;
    }
    batch = b.get();
    seq = next_seq_++;
    building_[seq] = std::move(b);
  }
  if (run != nullptr) {
    run->Request(this, seq, pos);
  } else if (batch->source == Building::Source::kTasks) {
    if (prefetch_ != nullptr) prefetch_->Ahead(pos);
    SubmitSamples(batch);
  }
  return true;
}

void Stream::SubmitSamples(Building* batch) {
  {
    absl::MutexLock lock(&mu_);
    ++building_tasks_;
  }
  batch->buffer->BeforeWrite();
  const uint32_t n = static_cast<uint32_t>(batch->ids.size());
  for (uint32_t i = 0; i < n; ++i) {
    pool_->Submit(group_->id(), [self = shared_from_this(), batch, i] {
      self->RunSample(batch, i);
    });
  }
}

void Stream::RunSample(Building* batch, uint32_t index) {
  if (!cancelled_) {
    const uint64_t id = batch->ids[index];
    pipeline::SampleRng rng(spec_.seed, batch->epoch, id, batch->reps[index]);
    const size_t num_tensors = layout_.per_sample().size();
    absl::InlinedVector<uint8_t*, 4> dst(num_tensors);
    for (size_t t = 0; t < num_tensors; ++t) {
      dst[t] = layout_.SamplePtr(batch->buffer->data(), t, index);
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
      counts_->Add(Count::kSourceRecords, 1);
      counts_->Add(Count::kSourceBytes, static_cast<int64_t>(read.bytes));
      counts_->Add(Count::kSourceWaitNs, read.wait_ns);
    }
    // Read names the dataset, shard file and key (the sample id) once.
    if (!status.ok()) batch->errors[index] = std::move(status);
    counters_->Observe(Stage::kRead, NowNs() - start - run_ns);
    counters_->Observe(Stage::kDecode, times.decode_ns);
    counters_->Observe(Stage::kAugment, times.augment_ns);
    counters_->Observe(Stage::kCollate, times.collate_ns);
  }
  if (batch->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    FinishSample(batch);
  }
}

void Stream::FinishSample(Building* batch) {
  // Only this call touches the batch until it is marked done.
  if (cancelled_) {
    batch->abandoned = true;
  } else {
    FinishBatchOf(batch);
  }
  {
    absl::MutexLock lock(&mu_);
    batch->done = true;
    --building_tasks_;
  }
  NotifyReady();
}

void Stream::FinishBatchOf(Building* batch) {
  ReadyBatch ready;
  ready.epoch = batch->epoch;
  ready.step = batch->step;
  std::vector<uint32_t> kept;
  for (uint32_t i = 0; i < batch->ids.size(); ++i) {
    const absl::Status& error = batch->errors[i];
    if (error.ok()) {
      kept.push_back(i);
      ready.sample_ids.push_back(batch->ids[i]);
      if (spec_.ra_reps > 1) ready.sample_reps.push_back(batch->reps[i]);
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
      batch->run_error = error;
      return;
    }
    ready.skipped_ids.push_back(batch->ids[i]);
    if (spec_.ra_reps > 1) ready.skipped_reps.push_back(batch->reps[i]);
  }
  ready.tensors =
      FinishBatch(layout_, batch->buffer->data(), kept, &ready.bytes);
  RunBatchOp(batch, ready);
  if (!batch->run_error.ok()) return;
  batch->delivered = std::move(ready);
  Encode(batch);
}

void Stream::RunBatchOp(Building* batch, const ReadyBatch& ready) {
  if (!pipeline_->has_batch_op() || ready.sample_ids.empty()) return;
  // The batch stage: after collation, with the batch's own generator, so
  // the batch is a function of its position alone.
  const int64_t start = NowNs();
  absl::InlinedVector<uint8_t*, 4> tensors;
  for (const BatchTensor& t : ready.tensors) {
    tensors.push_back(batch->buffer->data() + t.offset);
  }
  pipeline::SampleRng rng = pipeline::SampleRng::ForBatch(
      spec_.seed, batch->epoch, batch->step, spec_.rank);
  absl::Status status =
      pipeline_->RunBatch(absl::MakeConstSpan(tensors),
                          static_cast<uint32_t>(ready.sample_ids.size()), rng);
  counters_->Observe(Stage::kAugment, NowNs() - start);
  if (!status.ok()) {
    batch->run_error =
        absl::Status(status.code(),
                     absl::StrCat("batch op at epoch ", batch->epoch, " step ",
                                  batch->step, ": ", status.message()));
  }
}

void Stream::Encode(Building* batch) {
  ReadyBatch& ready = *batch->delivered;
  ready.decoded_bytes = ready.bytes;
  if (spec_.compression == Compression::kNone) return;
  if (spec_.compression == Compression::kAuto) {
    absl::MutexLock lock(&mu_);
    bool behind = false;
    for (const auto& [seq, b] : building_) {
      if (b.get() == batch) break;
      behind |= b->done;
    }
    if (!behind) return;
  }
  const int64_t start = NowNs();
  const size_t encoded =
      codec::CompressInPlace(batch->buffer->data(), ready.bytes);
  counts_->Add(Count::kCompressNs, NowNs() - start);
  if (encoded == 0) return;  // It would not get smaller.
  ready.compression = Compression::kZstd;
  ready.bytes = encoded;
  counts_->Add(Count::kCompressedBatches, 1);
}

void Stream::NotifyReady() {
  absl::ReaderMutexLock lock(&callback_mu_);
  if (callback_) callback_();
}

std::optional<ReadyBatch> Stream::TakeReady() {
  std::unique_ptr<Building> batch;
  {
    absl::MutexLock lock(&mu_);
    auto it = building_.find(deliver_seq_);
    if (it == building_.end() || !it->second->done || !status_.ok()) {
      return std::nullopt;
    }
    batch = std::move(it->second);
    building_.erase(it);
    ++deliver_seq_;
  }
  if (batch->abandoned) return std::nullopt;
  if (!batch->run_error.ok()) {
    // The caller is the transport, which checks Done() next: no callback.
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = batch->run_error;
    return std::nullopt;
  }
  ReadyBatch ready = *std::move(batch->delivered);
  ready.buffer = std::move(batch->buffer);
  CountDelivered(ready);
  if (batch->remote) counts_->Add(Count::kRemoteBatches, 1);
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
  run_ = std::move(run);
  lend_before_ = lend_before;
}

void Stream::Deliver(uint64_t seq, std::shared_ptr<const ReadyBatch> batch,
                     bool shared, const absl::Status& error) {
  Building* b = nullptr;
  bool lend = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = building_.find(seq);
    if (it == building_.end() || it->second->source != Building::Source::kRun) {
      return;
    }
    b = it->second.get();
    b->source = Building::Source::kDelivering;
    lend = b->epoch * steps_per_epoch_ + b->step < lend_before_;
  }
  // Only this call touches b until it is marked done.
  if (error.ok()) {
    ReadyBatch ready;
    ready.epoch = b->epoch;
    ready.step = b->step;
    ready.sample_ids = batch->sample_ids;
    ready.skipped_ids = batch->skipped_ids;
    ready.sample_reps = batch->sample_reps;
    ready.skipped_reps = batch->skipped_reps;
    ready.tensors = batch->tensors;
    ready.bytes = batch->bytes;
    ready.shared = shared;
    if (lend) {
      b->buffer = std::make_unique<LentBatchBuffer>(std::move(batch),
                                                    std::move(b->buffer));
    } else {
      b->buffer->BeforeWrite();
      std::memcpy(b->buffer->data(), batch->buffer->data(), batch->bytes);
    }
    b->delivered = std::move(ready);
  } else {
    b->run_error = error;
  }
  {
    absl::MutexLock lock(&mu_);
    b->done = true;
  }
  NotifyReady();
}

void Stream::DetachFromRun() {
  std::vector<Building*> waiting;
  std::shared_ptr<SharedRun> run;  // Let go outside the lock.
  {
    absl::MutexLock lock(&mu_);
    run = std::move(run_);
    for (auto& [seq, b] : building_) {
      if (b->source != Building::Source::kRun) continue;
      b->source = Building::Source::kTasks;
      waiting.push_back(b.get());
    }
  }
  for (Building* b : waiting) SubmitSamples(b);
}

bool Stream::HasMore() {
  // Read before taking mu_: the pool's lock is never taken inside it.
  const int workers = pool_->active_threads();
  absl::MutexLock lock(&mu_);
  return !cancelled_ && status_.ok() && !AtEndLocked() &&
         !BuildingEnoughLocked(workers);
}

bool Stream::BuildingEnoughLocked(int workers) const {
  // A shared run builds elsewhere; a helper's chunk takes its buffers when
  // it is placed, which happens in Fill.
  if (run_ != nullptr || placer_ != nullptr) return false;
  const uint64_t samples =
      uint64_t{building_tasks_} * std::max<uint32_t>(1, spec_.batch_size);
  const uint64_t wanted = uint64_t{kBuildAheadPerWorker} *
                          static_cast<uint64_t>(std::max(1, workers));
  return building_tasks_ >= kBuildAhead && samples >= wanted;
}

bool Stream::Done() {
  absl::MutexLock lock(&mu_);
  if (!status_.ok()) return true;
  return AtEndLocked() && building_.empty();
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
  std::map<uint64_t, std::shared_ptr<RemoteChunk>> chunks;
  {
    absl::MutexLock lock(&mu_);
    run = std::move(run_);
    chunks = chunks_;
  }
  if (run != nullptr) run->Leave(this);
  for (auto& [begin, chunk] : chunks) chunk->Cancel();
}

void Stream::RecordAck(double wait_seconds, double busy_seconds) {
  wait_seconds = std::max(0.0, wait_seconds);
  busy_seconds = std::max(0.0, busy_seconds);
  counts_->Add(Count::kAcks, 1);
  counts_->Add(Count::kWaitNs, static_cast<int64_t>(wait_seconds * 1e9));
  counts_->Add(Count::kBusyNs, static_cast<int64_t>(busy_seconds * 1e9));
  if (placer_ == nullptr) return;
  // The placer asks how much the consumer waited over the last second.
  const int64_t now = NowNs();
  absl::MutexLock lock(&mu_);
  recent_acks_.push_back({now, wait_seconds, busy_seconds});
  while (now - recent_acks_.front().at_ns > 1'000'000'000) {
    recent_acks_.pop_front();
  }
}

void Stream::RecordTransfer(int64_t nanoseconds) {
  counters_->Observe(Stage::kTransfer, nanoseconds);
}

StreamStats Stream::stats() const {
  StreamStats s;
  s.counts = counts_->Read();
  absl::MutexLock lock(&mu_);
  s.sharing = run_ != nullptr;
  for (const auto& [seq, batch] : building_) {
    (batch->done ? s.queued : s.building) += 1;
  }
  return s;
}

}  // namespace stoker::service
