#include "server/service/stream_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stoker::service {

StreamService::StreamService(pipeline::WorkerPool* pool,
                             ServiceOptions options,
                             std::shared_ptr<const Catalog> catalog)
    : pool_(pool),
      options_(options),
      admission_(std::make_shared<Admission>(
          pool, AdmissionLimits{options.max_streams,
                                options.max_streams_per_peer,
                                options.memory_budget})),
      runs_(pool, admission_.get(), options_.share_lag_window,
            options_.run_memory),
      catalog_(std::move(catalog)) {}

std::shared_ptr<const Catalog> StreamService::catalog() const {
  absl::MutexLock lock(&mu_);
  return catalog_;
}

void StreamService::SetCatalog(std::shared_ptr<const Catalog> catalog) {
  absl::MutexLock lock(&mu_);
  catalog_ = std::move(catalog);
}

absl::StatusOr<PendingOpen> StreamService::Prepare(
    const StreamSpec& spec, absl::Time deadline) const {
  OpenLimits limits;
  limits.max_batch_size = options_.max_batch_size;
  limits.max_prefetch = options_.max_prefetch;
  limits.max_batch_bytes = options_.max_batch_bytes;
  limits.default_prefetch = options_.tuned_prefetch != nullptr
                                ? options_.tuned_prefetch->load()
                                : options_.default_prefetch;
  limits.on_corrupt = options_.on_corrupt;
  // A request out of bounds hears so even while shutting down.
  if (absl::Status s = CheckBounds(spec, limits); !s.ok()) return s;
  std::shared_ptr<const Catalog> catalog;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError("stokerd is shutting down");
    }
    catalog = catalog_;
  }
  if (options_.staging && !catalog->FindDataset(spec.dataset).ok()) {
    // Being staged (the Opener waits), or its staging failed.
    if (absl::Status s = options_.staging(spec.dataset); !s.ok()) return s;
  }
  absl::StatusOr<OpenPlan> plan = PlanOpen(spec, std::move(catalog), limits);
  if (!plan.ok()) return plan.status();
  return PendingOpen{
      *std::move(plan),
      std::min(deadline,
               absl::Now() + absl::Seconds(options_.admission_wait_seconds))};
}

absl::StatusOr<std::shared_ptr<StreamTicket>> StreamService::TryAdmit(
    const PendingOpen& open, bool* waiting) {
  return admission_->TryAdmit(open.plan.request, waiting);
}

void StreamService::StopWaiting(const PendingOpen& open) {
  admission_->StopWaiting(open.plan.request);
}

void StreamService::SetAdmissionListener(std::function<void()> listener) {
  admission_->SetListener(std::move(listener));
}

absl::StatusOr<OpenedStream> StreamService::Open(const StreamSpec& spec,
                                                 const WaitContext& wait) {
  absl::StatusOr<PendingOpen> pending = Prepare(spec, wait.deadline);
  if (!pending.ok()) return pending.status();
  WaitContext bounded = wait;
  bounded.deadline = pending->deadline;
  absl::StatusOr<std::shared_ptr<StreamTicket>> ticket =
      admission_->Admit(pending->plan.request, bounded);
  if (!ticket.ok()) return ticket.status();
  return Complete(*std::move(pending), *std::move(ticket));
}

absl::StatusOr<OpenedStream> StreamService::Complete(
    PendingOpen pending, std::shared_ptr<StreamTicket> ticket) {
  OpenPlan& plan = pending.plan;
  Stream::Options& options = plan.stream;
  options.pool = pool_;
  options.group = ticket->group();
  options.counters = counts_.For(options.spec);
  options.placer = options_.placer;
  // A shared run's producer, if this stream starts one, is built from the
  // same options (SharedRuns::Join).
  std::optional<Stream::Options> producer;
  if (options.spec.share) producer = options;

  const uint64_t id = ticket->id();
  OpenedStream opened;
  StreamObserver* const observer = observer_;
  if (observer == nullptr) {
    opened.stream = std::make_shared<Stream>(std::move(options));
  } else {
    // The deleter runs once the last task and the transport let go.
    const auto opened_at = std::chrono::steady_clock::now();
    opened.stream = std::shared_ptr<Stream>(
        new Stream(std::move(options)), [observer, id, opened_at](Stream* s) {
          StreamSnapshot snap{id, s->spec(), s->steps_per_epoch(), s->stats()};
          observer->OnClose(snap, s->status(),
                            std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - opened_at)
                                .count());
          delete s;
        });
  }
  opened.ticket = std::move(ticket);
  opened.prefetch = opened.stream->spec().prefetch;
  opened.window = plan.window;
  opened.batch_bytes = plan.batch_bytes;
  opened.formatted = std::move(plan.formatted);
  if (producer.has_value()) {
    absl::StatusOr<std::shared_ptr<BufferSource>> run =
        runs_.Join(opened.stream, *producer, plan.window,
                   opened.ticket->weight(), plan.batch_bytes);
    if (run.ok()) {
      opened.run_memory = *std::move(run);
      opened.shared = true;
    } else {
      opened.share_refused = absl::StrCat(
          "no shared run: ", run.status().message(),
          "; this stream builds its own batches");
      counts_.RecordShareFallback();
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      it = it->second.expired() ? streams_.erase(it) : std::next(it);
    }
    streams_[id] = opened.stream;
  }
  if (observer != nullptr) {
    observer->OnOpen(StreamSnapshot{id, opened.stream->spec(),
                                    opened.stream->steps_per_epoch(),
                                    opened.stream->stats()},
                     opened.ticket->bytes(), opened.share_refused);
  }
  return opened;
}

void StreamService::SetJobWeights(std::map<std::string, double> weights) {
  admission_->SetJobWeights(std::move(weights));
}

void StreamService::Shutdown() {
  std::vector<std::shared_ptr<Stream>> open;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (auto& [id, weak] : streams_) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  admission_->Shutdown();
  for (auto& s : open) {
    s->Fail(absl::UnavailableError("stokerd is shutting down; reconnect"));
  }
}

std::vector<StreamSnapshot> StreamService::Snapshot() const {
  std::vector<std::pair<uint64_t, std::shared_ptr<Stream>>> open;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, weak] : streams_) {
      if (auto s = weak.lock()) open.emplace_back(id, std::move(s));
    }
  }
  std::vector<StreamSnapshot> out;
  for (const auto& [id, stream] : open) {
    StreamSnapshot snap;
    snap.id = id;
    snap.spec = stream->spec();
    snap.steps_per_epoch = stream->steps_per_epoch();
    snap.stats = stream->stats();
    out.push_back(std::move(snap));
  }
  return out;
}

StreamService::Stats StreamService::GetStats() const {
  Stats s;
  static_cast<Admission::Stats&>(s) = admission_->GetStats();
  s.datasets = DatasetHealthOf(*catalog());
  s.shared_runs = runs_.alive();
  s.share_fallbacks = counts_.share_fallbacks();
  return s;
}

}  // namespace stoker::service
