#include "server/service/shared_run.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "server/service/stream.h"

namespace stoker::service {

std::shared_ptr<SharedRun> SharedRun::Create(
    std::shared_ptr<Stream> producer, uint64_t start, uint32_t capacity,
    uint32_t window, std::shared_ptr<PoolGroup> group,
    std::shared_ptr<BufferSource> memory) {
  std::shared_ptr<SharedRun> run(
      new SharedRun(std::move(producer), start, capacity, window,
                    std::move(group), std::move(memory)));
  run->producer_->SetReadyCallback([weak = std::weak_ptr<SharedRun>(run)] {
    if (auto self = weak.lock()) self->Process();
  });
  return run;
}

SharedRun::SharedRun(std::shared_ptr<Stream> producer, uint64_t start,
                     uint32_t capacity, uint32_t window,
                     std::shared_ptr<PoolGroup> group,
                     std::shared_ptr<BufferSource> memory)
    : producer_(std::move(producer)),
      capacity_(std::max<uint32_t>(capacity, window + 1)),
      lend_limit_(kMaxStreams * window),
      group_(std::move(group)),
      memory_(std::move(memory)),
      base_(start),
      next_build_(start) {}

SharedRun::~SharedRun() {
  // The producer's callback holds only a weak pointer to this run, so the
  // producer's remaining tasks are merely told to skip their work.
  producer_->StopWork();
}

bool SharedRun::Attach(const std::shared_ptr<Stream>& stream, uint64_t start,
                       uint64_t end, uint32_t window, double weight) {
  absl::MutexLock lock(&mu_);
  uint32_t lent = window;
  for (const auto& [key, sub] : subs_) lent += sub.window;
  // A window up to the capacity works: only a stream whose own window
  // filled the run could pin the oldest batch while asking for the next.
  if (!failed_.ok() || window >= capacity_ || lent > lend_limit_ ||
      start < base_ || start > next_build_) {
    return false;
  }
  Sub& sub = subs_[stream.get()];
  sub.stream = stream;
  sub.weight = weight;
  sub.window = window;
  sub.requested_upto = start;
  sub.end = end;
  UpdateWeightLocked();
  return true;
}

void SharedRun::Request(Stream* stream, uint64_t seq, uint64_t pos) {
  const std::shared_ptr<SharedRun> self = shared_from_this();
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = subs_.find(stream);
    if (it != subs_.end()) {
      known = true;
      it->second.pending[pos] = seq;
      it->second.requested_upto = std::max(it->second.requested_upto, pos + 1);
    }
  }
  if (!known) {
    // Detached between the stream's check and this call: it builds alone.
    stream->DetachFromRun();
    return;
  }
  Schedule();
}

void SharedRun::Schedule() {
  if (scheduled_.exchange(true)) return;
  group_->Submit([self = shared_from_this()] {
    self->scheduled_ = false;
    self->Process();
  });
}

void SharedRun::Leave(Stream* stream) {
  {
    absl::MutexLock lock(&mu_);
    if (subs_.erase(stream) == 0) return;
    // The last one out lets the run go at once, with its reservation.
    if (subs_.empty()) return;
    UpdateWeightLocked();
  }
  // The batch it pinned may have been all that kept the run from building.
  Schedule();
}

void SharedRun::Process() {
  const std::shared_ptr<SharedRun> self = shared_from_this();
  for (;;) {
    Work work;
    {
      absl::MutexLock lock(&mu_);
      CollectLocked(&work);
    }
    if (work.deliveries.empty() && work.detached.empty()) return;
    for (Delivery& d : work.deliveries) {
      if (auto stream = d.stream.lock()) {
        stream->Deliver(d.seq, std::move(d.batch), d.shared, d.error);
      }
    }
    for (const std::weak_ptr<Stream>& weak : work.detached) {
      if (auto stream = weak.lock()) stream->DetachFromRun();
    }
    // Streams that let batches go may have freed buffers: go again.
  }
}

void SharedRun::CollectLocked(Work* work) {
  const uint64_t steps = producer_->steps_per_epoch();
  // Batches the producer finished, in order, into their slots.
  while (std::optional<ReadyBatch> ready = producer_->TakeReady()) {
    const uint64_t pos = ready->epoch * steps + ready->step;
    Slot& slot = slots_[pos - base_];
    std::weak_ptr<SharedRun> weak = weak_from_this();
    slot.batch = std::shared_ptr<const ReadyBatch>(
        new ReadyBatch(*std::move(ready)), [weak](const ReadyBatch* b) {
          std::unique_ptr<ReadyBatch> owned(const_cast<ReadyBatch*>(b));
          if (auto run = weak.lock()) {
            run->ReturnBuffer(std::move(owned->buffer));
          }
        });
  }
  if (failed_.ok() && producer_->Done()) {
    // The producer is endless: Done means it failed, at the first slot
    // that has no batch.
    failed_ = producer_->status();
    failed_at_ = base_;
    while (failed_at_ < next_build_ && slots_[failed_at_ - base_].batch) {
      ++failed_at_;
    }
  }

  for (auto& [key, sub] : subs_) ServeLocked(sub, key, work);

  uint64_t wanted = 0;
  for (const auto& [key, sub] : subs_) {
    wanted = std::max(wanted, sub.requested_upto);
  }
  while (failed_.ok() && next_build_ < wanted) {
    if (slots_.size() >= capacity_ && !DropOneLocked()) {
      // Full, and the oldest batch is pinned by streams that lag by more
      // than the window: they go on alone.
      bool detached = false;
      for (auto it = subs_.begin(); it != subs_.end();) {
        if (it->second.NextNeeded() <= base_) {
          work->detached.push_back(it->second.stream);
          it = subs_.erase(it);
          detached = true;
        } else {
          ++it;
        }
      }
      if (!detached) break;  // The oldest batch is still being built.
      UpdateWeightLocked();
      continue;
    }
    std::unique_ptr<BatchBuffer> buffer = TakeBuffer();
    if (buffer == nullptr) break;  // Streams hold the rest, for now.
    if (!producer_->Fill(std::move(buffer))) break;
    slots_.emplace_back();
    ++next_build_;
  }
}

void SharedRun::ServeLocked(Sub& sub, Stream* key, Work* work) {
  while (!sub.pending.empty()) {
    const auto [pos, seq] = *sub.pending.begin();
    Delivery d;
    d.stream = sub.stream;
    d.seq = seq;
    if (!failed_.ok() && pos >= failed_at_) {
      d.error = failed_;
    } else if (pos < next_build_ && slots_[pos - base_].batch != nullptr) {
      Slot& slot = slots_[pos - base_];
      bool others = slot.deliveries > 0;
      for (const auto& [other_key, other] : subs_) {
        if (other_key != key && other.Needs(pos)) others = true;
      }
      d.batch = slot.batch;
      d.shared = others;
      slot.deliveries += 1;
    } else {
      return;
    }
    sub.pending.erase(sub.pending.begin());
    work->deliveries.push_back(std::move(d));
  }
}

bool SharedRun::DropOneLocked() {
  if (slots_.empty() || slots_.front().batch == nullptr) return false;
  for (const auto& [key, sub] : subs_) {
    if (sub.Needs(base_)) return false;
  }
  slots_.pop_front();  // Streams may still hold the batch.
  ++base_;
  return true;
}

void SharedRun::UpdateWeightLocked() {
  double weight = 0;
  for (const auto& [key, sub] : subs_) weight += sub.weight;
  if (weight > 0) group_->SetWeight(weight);
}

std::unique_ptr<BatchBuffer> SharedRun::TakeBuffer() {
  std::unique_ptr<BatchBuffer> buffer;
  {
    absl::MutexLock lock(&free_mu_);
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
      return buffer;
    }
    // Set before asking the source, so a buffer returned meanwhile
    // schedules a pass.
    starved_ = true;
  }
  buffer = memory_->Take();
  if (buffer != nullptr) starved_ = false;
  return buffer;
}

void SharedRun::ReturnBuffer(std::unique_ptr<BatchBuffer> buffer) {
  {
    absl::MutexLock lock(&free_mu_);
    free_.push_back(std::move(buffer));
  }
  if (starved_.exchange(false)) Schedule();
}

}  // namespace stoker::service
