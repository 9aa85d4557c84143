#include "server/service/shared_runs.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::service {

SharedRuns::SharedRuns(pipeline::WorkerPool* pool, Admission* admission,
                       uint32_t lag_window, BufferSourceFactory memory)
    : pool_(pool),
      admission_(admission),
      lag_window_(lag_window),
      memory_(std::move(memory)) {}

absl::StatusOr<std::shared_ptr<BufferSource>> SharedRuns::Join(
    const std::shared_ptr<Stream>& stream, const Stream::Options& options,
    uint32_t window, double weight, uint64_t batch_bytes) {
  const StreamSpec& spec = stream->spec();
  const uint64_t steps = stream->steps_per_epoch();
  const uint64_t start = spec.start_epoch * steps + spec.start_step;
  const uint64_t end = EndPosition(spec, steps);
  // The last window of batches is copied: a client may hold those after
  // the stream ends, when nothing keeps the run from reusing its buffers.
  const uint64_t lend_before =
      end == std::numeric_limits<uint64_t>::max()
          ? end
          : end - std::min<uint64_t>(end, window);
  RunKey key{options.catalog.get(), spec.dataset,    spec.pipeline,
             spec.seed,             spec.batch_size, spec.world_size,
             spec.rank,             spec.drop_last,  spec.ra_reps,
             spec.raw};
  absl::MutexLock lock(&mu_);
  std::vector<std::weak_ptr<SharedRun>>& runs = runs_[key];
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [](const auto& w) { return w.expired(); }),
             runs.end());
  for (const std::weak_ptr<SharedRun>& weak : runs) {
    std::shared_ptr<SharedRun> run = weak.lock();
    if (run != nullptr && run->Attach(stream, start, end, window, weight)) {
      stream->AttachRun(run, lend_before);
      return run->memory();
    }
  }
  const uint32_t capacity = lag_window_ + window;
  absl::StatusOr<std::shared_ptr<void>> reservation = admission_->Reserve(
      capacity * batch_bytes,
      absl::StrCat("a shared run (", capacity, " batches of ",
                   FormatBytes(batch_bytes), ")"));
  absl::StatusOr<std::shared_ptr<BufferSource>> memory;
  if (!reservation.ok()) {
    memory = reservation.status();
  } else if (memory_) {
    memory = memory_(SharedRun::BuffersNeeded(capacity, window), batch_bytes,
                     *reservation);
  } else {
    memory = std::make_shared<HeapBufferSource>(
        SharedRun::BuffersNeeded(capacity, window), batch_bytes,
        *reservation);
  }
  if (!memory.ok()) {
    if (runs.empty()) runs_.erase(key);
    return memory.status();
  }
  auto group = std::make_shared<PoolGroup>(pool_, weight);
  // The producer builds on demand, endless, for as long as the run is
  // used, into the run's buffers as they are (no delivery encodes them);
  // the streams it serves count what they get (count_deliveries), and it
  // places nothing on helpers.
  Stream::Options producer = options;
  producer.spec.epochs = 0;
  producer.spec.end_epoch = producer.spec.end_step = 0;
  producer.group = group;
  producer.count_deliveries = false;
  producer.placer = nullptr;
  auto run = SharedRun::Create(std::make_shared<Stream>(std::move(producer)),
                               start, capacity, window, std::move(group),
                               *std::move(memory));
  run->Attach(stream, start, end, window, weight);
  stream->AttachRun(run, lend_before);
  runs.push_back(run);
  return run->memory();
}

uint32_t SharedRuns::alive() const {
  uint32_t n = 0;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, runs] : runs_) {
    for (const auto& weak : runs) n += weak.expired() ? 0 : 1;
  }
  return n;
}

}  // namespace stoker::service
