#include "server/service/stream.h"

#include <algorithm>
#include <chrono>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::service {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// A batch being built. Each of its samples is written by exactly one task;
// the task that finishes last marks the batch done.
struct Stream::Building {
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> ids;
  std::unique_ptr<BatchBuffer> buffer;
  std::atomic<uint32_t> remaining{0};
  std::vector<absl::Status> errors;  // Slot i written only by sample i's task.
  bool done = false;                 // Guarded by the stream's mu_.
};

Stream::Stream(Options options)
    : spec_(std::move(options.spec)),
      catalog_(std::move(options.catalog)),
      dataset_(options.dataset),
      pipeline_(std::move(options.pipeline)),
      layout_(pipeline_->outputs(), spec_.batch_size),
      pool_(options.pool),
      group_(options.group),
      on_corrupt_(options.on_corrupt),
      steps_per_epoch_(options.sampler->StepsPerEpoch()),
      samples_per_epoch_(options.sampler->SamplesPerEpoch()),
      counters_(std::move(options.counters)),
      sampler_(*std::move(options.sampler)),
      next_epoch_(spec_.start_epoch),
      next_step_(spec_.start_step) {}

Stream::~Stream() { pool_->RemoveGroup(group_); }

void Stream::SetReadyCallback(std::function<void()> callback) {
  absl::MutexLock lock(&callback_mu_);
  callback_ = std::move(callback);
}

bool Stream::AtEndLocked() const {
  return spec_.epochs != 0 && next_epoch_ >= spec_.epochs;
}

bool Stream::Fill(std::unique_ptr<BatchBuffer> buffer) {
  Building* batch = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_ || !status_.ok() || AtEndLocked()) return false;
    auto b = std::make_unique<Building>();
    b->epoch = next_epoch_;
    b->step = next_step_;
    b->ids = sampler_.StepSamples(next_epoch_, next_step_);
    b->buffer = std::move(buffer);
    b->remaining = static_cast<uint32_t>(b->ids.size());
    b->errors.resize(b->ids.size());
    if (++next_step_ == steps_per_epoch_) {
      next_step_ = 0;
      ++next_epoch_;
    }
    batch = b.get();
    building_[next_seq_++] = std::move(b);
  }
  const uint32_t n = static_cast<uint32_t>(batch->ids.size());
  for (uint32_t i = 0; i < n; ++i) {
    pool_->Submit(group_, [self = shared_from_this(), batch, i] {
      self->RunSample(batch, i);
    });
  }
  return true;
}

void Stream::RunSample(Building* batch, uint32_t index) {
  if (!cancelled_) {
    const uint64_t id = batch->ids[index];
    pipeline::SampleRng rng(spec_.seed, batch->epoch, id);
    const size_t num_tensors = layout_.per_sample().size();
    absl::InlinedVector<uint8_t*, 4> dst(num_tensors);
    for (size_t t = 0; t < num_tensors; ++t) {
      dst[t] = layout_.SamplePtr(batch->buffer->data(), t, index);
    }
    pipeline::StageTimes times;
    int64_t run_ns = 0;
    const int64_t start = NowNs();
    absl::Status status = dataset_->Read(
        id, [&](const dataset::RecordView& record) -> absl::Status {
          const int64_t run_start = NowNs();
          absl::Status s = pipeline_->Run(
              absl::MakeConstSpan(record.fields.data(), record.fields.size()),
              rng, absl::MakeConstSpan(dst), &times);
          run_ns = NowNs() - run_start;
          return s;
        });
    if (!status.ok()) {
      batch->errors[index] = absl::Status(
          status.code(), absl::StrCat("dataset '", spec_.dataset, "' sample ",
                                      id, ": ", status.message()));
    }
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
  {
    absl::MutexLock lock(&mu_);
    batch->done = true;
  }
  NotifyReady();
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
  ReadyBatch ready;
  ready.epoch = batch->epoch;
  ready.step = batch->step;
  std::vector<uint32_t> kept;
  for (uint32_t i = 0; i < batch->ids.size(); ++i) {
    const absl::Status& error = batch->errors[i];
    if (error.ok()) {
      kept.push_back(i);
      ready.sample_ids.push_back(batch->ids[i]);
      continue;
    }
    if (on_corrupt_ == OnCorrupt::kFail) {
      // The caller is the transport, which checks Done() next: no callback.
      absl::MutexLock lock(&mu_);
      if (status_.ok()) status_ = error;
      return std::nullopt;
    }
    ready.skipped_ids.push_back(batch->ids[i]);
  }
  const uint32_t n = static_cast<uint32_t>(kept.size());
  if (n != layout_.batch_size()) {
    CompactBatch(layout_, batch->buffer->data(), kept);
  }
  ready.tensors = DescribeBatch(layout_, n);
  ready.bytes = layout_.Bytes(n);
  ready.buffer = std::move(batch->buffer);

  absl::MutexLock lock(&mu_);
  stats_.samples += n;
  stats_.batches += 1;
  stats_.skipped += static_cast<int64_t>(ready.skipped_ids.size());
  stats_.bytes += static_cast<int64_t>(ready.bytes);
  counters_->samples += n;
  counters_->batches += 1;
  counters_->skipped += static_cast<int64_t>(ready.skipped_ids.size());
  counters_->bytes += static_cast<int64_t>(ready.bytes);
  return ready;
}

bool Stream::HasMore() {
  absl::MutexLock lock(&mu_);
  return !cancelled_ && status_.ok() && !AtEndLocked();
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

void Stream::Cancel() {
  cancelled_ = true;
  absl::MutexLock lock(&callback_mu_);
  callback_ = nullptr;
}

void Stream::RecordAck(double wait_seconds, double busy_seconds) {
  wait_seconds = std::max(0.0, wait_seconds);
  busy_seconds = std::max(0.0, busy_seconds);
  counters_->acks += 1;
  counters_->wait_ns += static_cast<int64_t>(wait_seconds * 1e9);
  counters_->busy_ns += static_cast<int64_t>(busy_seconds * 1e9);
  absl::MutexLock lock(&mu_);
  stats_.acks += 1;
  stats_.wait_seconds += wait_seconds;
  stats_.busy_seconds += busy_seconds;
}

void Stream::RecordTransfer(int64_t nanoseconds) {
  counters_->Observe(Stage::kTransfer, nanoseconds);
}

StreamStats Stream::stats() const {
  absl::MutexLock lock(&mu_);
  StreamStats s = stats_;
  for (const auto& [seq, batch] : building_) {
    (batch->done ? s.queued : s.building) += 1;
  }
  return s;
}

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kRead:
      return "read";
    case Stage::kDecode:
      return "decode";
    case Stage::kAugment:
      return "augment";
    case Stage::kCollate:
      return "collate";
    case Stage::kTransfer:
      return "transfer";
  }
  return "unknown";
}

}  // namespace stoker::service
