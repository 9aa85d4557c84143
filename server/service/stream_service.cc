#include "server/service/stream_service.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/service/stream_session.h"

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
      catalog_(std::move(catalog)) {}

std::shared_ptr<const Catalog> StreamService::catalog() const {
  absl::MutexLock lock(&mu_);
  return catalog_;
}

void StreamService::SetCatalog(std::shared_ptr<const Catalog> catalog) {
  absl::MutexLock lock(&mu_);
  catalog_ = std::move(catalog);
}

absl::Status StreamService::Validate(const StreamSpec& spec) const {
  if (spec.batch_size == 0 || spec.batch_size > options_.max_batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", spec.batch_size,
                     " is outside the bound [1, max_batch_size=",
                     options_.max_batch_size, "]"));
  }
  if (spec.prefetch > options_.max_prefetch) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch ", spec.prefetch,
                     " is over the bound max_prefetch=", options_.max_prefetch));
  }
  // The ring of an shm stream has prefetch + hold slots: unbounded, the sum
  // could wrap (tests/fuzz/corpus/fuzz_request/crash-hold-wraps-window).
  if (spec.hold > options_.max_prefetch) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold ", spec.hold,
                     " is over the bound max_prefetch=", options_.max_prefetch));
  }
  if (spec.world_size == 0 || spec.rank >= spec.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", spec.rank, " is not below world_size ",
                     spec.world_size));
  }
  // Outside this range a weight is meaningless to the scheduler (1e-300
  // once broke fairness for the daemon's life); NaN fails the test too.
  if (!(spec.weight >= pipeline::WorkerPool::kMinWeight &&
        spec.weight <= pipeline::WorkerPool::kMaxWeight)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "weight %g is outside the bound [%g, %g]", spec.weight,
        pipeline::WorkerPool::kMinWeight, pipeline::WorkerPool::kMaxWeight));
  }
  if (spec.job_id.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id is ", spec.job_id.size(),
                     " bytes, over the bound of ", kMaxNameBytes));
  }
  for (const auto& [what, name] :
       {std::pair{"dataset", &spec.dataset}, {"pipeline", &spec.pipeline}}) {
    if (name->size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " name is ", name->size(),
                       " bytes, over the bound of ", kMaxNameBytes));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PendingOpen> StreamService::Prepare(
    const StreamSpec& spec, absl::Time deadline) const {
  if (absl::Status s = Validate(spec); !s.ok()) return s;
  PendingOpen p;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError("stokerd is shutting down");
    }
    p.catalog = catalog_;
  }
  absl::StatusOr<const dataset::Dataset*> dataset =
      p.catalog->FindDataset(spec.dataset);
  if (!dataset.ok() && options_.staging) {
    // Being staged (the Opener waits), or its staging failed.
    if (absl::Status s = options_.staging(spec.dataset); !s.ok()) return s;
  }
  if (!dataset.ok()) return dataset.status();
  absl::StatusOr<const pipeline::Pipeline*> pipe =
      p.catalog->FindPipeline(spec.pipeline);
  if (!pipe.ok()) return pipe.status();
  auto bound = (*pipe)->Bind(InputSchema((*dataset)->manifest()),
                             spec.raw ? pipeline::BindMode::kRendered
                                      : pipeline::BindMode::kOutput);
  if (absl::IsFailedPrecondition(bound.status())) return bound.status();
  if (!bound.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline '", spec.pipeline, "' cannot run on dataset '",
                     spec.dataset, "': ", bound.status().message()));
  }
  if (spec.raw) {
    auto formatted = (*pipe)->Bind(InputSchema((*dataset)->manifest()));
    if (!formatted.ok()) return formatted.status();
    p.formatted = *std::move(formatted);
  }
  dataset::SamplerOptions so;
  so.num_samples = (*dataset)->num_samples();
  so.seed = spec.seed;
  so.batch_size = spec.batch_size;
  so.rank = spec.rank;
  so.world_size = spec.world_size;
  so.drop_last = spec.drop_last;
  so.ra_reps = spec.ra_reps;
  absl::StatusOr<dataset::Sampler> sampler = dataset::Sampler::Create(so);
  if (!sampler.ok()) return sampler.status();
  const uint64_t steps = sampler->StepsPerEpoch();
  if (steps == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", spec.rank, " of ", spec.world_size, " gets no batch of ",
        spec.batch_size, " from dataset '", spec.dataset, "' (",
        so.num_samples, " samples", spec.drop_last ? ", drop_last" : "",
        ")"));
  }
  if (spec.start_step >= steps ||
      (spec.epochs != 0 && spec.start_epoch > spec.epochs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start position (epoch ", spec.start_epoch, ", step ", spec.start_step,
        ") is outside the stream: ", steps, " steps per epoch, ", spec.epochs,
        " epochs"));
  }
  if (spec.end_epoch != 0 || spec.end_step != 0) {
    if (spec.end_step >= steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "end position (epoch ", spec.end_epoch, ", step ", spec.end_step,
          ") is outside its epoch: ", steps, " steps per epoch"));
    }
    // At the end is fine (a client that reconnects after the last batch
    // gets an empty stream); before it is a mistake.
    if (spec.end_epoch < spec.start_epoch ||
        (spec.end_epoch == spec.start_epoch &&
         spec.end_step < spec.start_step)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "end position (epoch ", spec.end_epoch, ", step ", spec.end_step,
          ") is before the start (epoch ", spec.start_epoch, ", step ",
          spec.start_step, ")"));
    }
  }

  BatchLayout layout((*bound)->slots(), spec.batch_size);
  const uint64_t batch_bytes = layout.Capacity();
  if (batch_bytes > options_.max_batch_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", spec.batch_size, " is ", FormatBytes(batch_bytes),
        ", over the bound max_batch_bytes=",
        FormatBytes(options_.max_batch_bytes)));
  }
  const uint32_t default_prefetch = options_.tuned_prefetch != nullptr
                                        ? options_.tuned_prefetch->load()
                                        : options_.default_prefetch;
  const uint32_t prefetch =
      spec.prefetch == 0 ? default_prefetch : spec.prefetch;
  const uint32_t window =
      StreamSession::Window(prefetch, spec.client_holds, spec.hold);

  p.request.bytes = batch_bytes * window;
  p.request.peer = spec.peer.empty() ? "local" : spec.peer;
  p.request.job_id = spec.job_id;
  p.request.rank = spec.rank;
  const dataset::Manifest& manifest = (*dataset)->manifest();
  p.request.plan = JobPlan{spec.dataset,
                           spec.pipeline,
                           spec.seed,
                           spec.batch_size,
                           spec.world_size,
                           spec.drop_last,
                           so.num_samples,
                           spec.ra_reps,
                           manifest.content_digest.empty()
                               ? dataset::ManifestDigest(manifest)
                               : manifest.content_digest,
                           (*pipe)->definition()};
  p.request.weight = spec.weight;
  p.request.what = absl::StrCat("this stream (", window, " batches of ",
                                FormatBytes(batch_bytes), ")");
  p.spec = spec;
  p.spec.prefetch = prefetch;
  p.dataset = *dataset;
  p.pipeline = *pipe;
  p.bound = *std::move(bound);
  p.sampler = *std::move(sampler);
  p.window = window;
  p.batch_bytes = batch_bytes;
  p.deadline = std::min(
      deadline, absl::Now() + absl::Seconds(options_.admission_wait_seconds));
  return p;
}

absl::StatusOr<std::shared_ptr<StreamTicket>> StreamService::TryAdmit(
    const PendingOpen& open, bool* waiting) {
  return admission_->TryAdmit(open.request, waiting);
}

void StreamService::StopWaiting(const PendingOpen& open) {
  admission_->StopWaiting(open.request);
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
      admission_->Admit(pending->request, bounded);
  if (!ticket.ok()) return ticket.status();
  return Complete(*std::move(pending), *std::move(ticket));
}

absl::StatusOr<OpenedStream> StreamService::Complete(
    PendingOpen pending, std::shared_ptr<StreamTicket> ticket) {
  const StreamSpec& spec = pending.spec;
  const std::shared_ptr<const Catalog>& catalog = pending.catalog;
  const dataset::Dataset* const dataset = pending.dataset;
  const uint32_t prefetch = spec.prefetch;
  const uint32_t window = pending.window;
  const uint64_t batch_bytes = pending.batch_bytes;
  Stream::Options options;
  options.spec = spec;
  options.catalog = catalog;
  options.dataset = dataset;
  options.pipeline = std::move(pending.bound);
  options.sampler = std::move(pending.sampler);
  options.pool = pool_;
  options.group = ticket->group();
  options.on_corrupt = options_.on_corrupt;
  options.counters = CountersFor(spec);
  options.placer = options_.placer;
  // A shared run's producer is built from the same parts.
  std::optional<Stream::Options> producer;
  if (spec.share) {
    producer.emplace();
    producer->spec = options.spec;
    // The run's batches are lent as they are, to every transport.
    producer->spec.compression = Compression::kNone;
    producer->catalog = catalog;
    producer->dataset = dataset;
    producer->pipeline =
        pending.pipeline
            ->Bind(InputSchema(dataset->manifest()),
                   spec.raw ? pipeline::BindMode::kRendered
                            : pipeline::BindMode::kOutput)
            .value();
    producer->sampler = *options.sampler;
    producer->pool = pool_;
    producer->on_corrupt = options_.on_corrupt;
    producer->counters = options.counters;
    producer->count_deliveries = false;
  }

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
  opened.prefetch = prefetch;
  opened.window = window;
  opened.batch_bytes = batch_bytes;
  opened.formatted = std::move(pending.formatted);
  if (producer.has_value()) {
    absl::StatusOr<std::shared_ptr<BufferSource>> run =
        JoinRun(opened.stream, *std::move(producer), opened, batch_bytes);
    if (run.ok()) {
      opened.run_memory = *std::move(run);
      opened.shared = true;
    } else {
      opened.share_refused = absl::StrCat(
          "no shared run: ", run.status().message(),
          "; this stream builds its own batches");
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      it = it->second.expired() ? streams_.erase(it) : std::next(it);
    }
    streams_[id] = opened.stream;
    if (!opened.share_refused.empty()) ++share_fallbacks_;
  }
  if (observer != nullptr) {
    observer->OnOpen(StreamSnapshot{id, opened.stream->spec(),
                                    opened.stream->steps_per_epoch(),
                                    opened.stream->stats()},
                     opened.ticket->bytes(), opened.share_refused);
  }
  return opened;
}

absl::StatusOr<std::shared_ptr<BufferSource>> StreamService::JoinRun(
    const std::shared_ptr<Stream>& stream, Stream::Options producer,
    const OpenedStream& opened, uint64_t batch_bytes) {
  const StreamSpec& spec = stream->spec();
  const uint64_t steps = stream->steps_per_epoch();
  const uint64_t start = spec.start_epoch * steps + spec.start_step;
  const uint64_t end = EndPosition(spec, steps);
  // The last window of batches is copied: a client may hold those after
  // the stream ends, when nothing keeps the run from reusing its buffers.
  const uint64_t lend_before =
      end == std::numeric_limits<uint64_t>::max()
          ? end
          : end - std::min<uint64_t>(end, opened.window);
  const double weight = opened.ticket->weight();
  RunKey key{producer.catalog.get(), spec.dataset,    spec.pipeline,
             spec.seed,              spec.batch_size, spec.world_size,
             spec.rank,              spec.drop_last,  spec.ra_reps,
             spec.raw};
  absl::MutexLock lock(&mu_);
  std::vector<std::weak_ptr<SharedRun>>& runs = runs_[key];
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [](const auto& w) { return w.expired(); }),
             runs.end());
  for (const std::weak_ptr<SharedRun>& weak : runs) {
    std::shared_ptr<SharedRun> run = weak.lock();
    if (run != nullptr &&
        run->Attach(stream, start, end, opened.window, weight)) {
      stream->AttachRun(run, lend_before);
      return run->memory();
    }
  }
  const uint32_t capacity = options_.share_lag_window + opened.window;
  absl::StatusOr<std::shared_ptr<void>> reservation = admission_->Reserve(
      capacity * batch_bytes,
      absl::StrCat("a shared run (", capacity, " batches of ",
                   FormatBytes(batch_bytes), ")"));
  absl::StatusOr<std::shared_ptr<BufferSource>> memory;
  if (!reservation.ok()) {
    memory = reservation.status();
  } else if (options_.run_memory) {
    memory =
        options_.run_memory(SharedRun::BuffersNeeded(capacity, opened.window),
                            batch_bytes, *reservation);
  } else {
    memory = std::make_shared<HeapBufferSource>(
        SharedRun::BuffersNeeded(capacity, opened.window), batch_bytes,
        *reservation);
  }
  if (!memory.ok()) {
    if (runs.empty()) runs_.erase(key);
    return memory.status();
  }
  auto group = std::make_shared<PoolGroup>(pool_, weight);
  // Builds on demand, for as long as it is used; its role is in
  // count_deliveries = false: the streams it serves count what they get.
  producer.spec.epochs = 0;
  producer.spec.end_epoch = producer.spec.end_step = 0;
  producer.group = group;
  auto run = SharedRun::Create(std::make_shared<Stream>(std::move(producer)),
                               start, capacity, opened.window, std::move(group),
                               *std::move(memory));
  run->Attach(stream, start, end, opened.window, weight);
  stream->AttachRun(run, lend_before);
  runs.push_back(run);
  return run->memory();
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

std::shared_ptr<StreamCounters> StreamService::CountersFor(
    const StreamSpec& spec) {
  CounterKey key{spec.dataset, spec.pipeline, spec.job_id, spec.transport};
  absl::MutexLock lock(&mu_);
  // Job ids come from clients: past a bound, new ones share one label set so
  // that the metrics' cardinality stays bounded.
  if (counters_.size() >= kMaxCounterKeys && counters_.count(key) == 0) {
    key.job = "_other";
  }
  auto& slot = counters_[key];
  if (slot == nullptr) slot = std::make_shared<StreamCounters>();
  return slot;
}

std::vector<std::pair<CounterKey, std::shared_ptr<const StreamCounters>>>
StreamService::Counters() const {
  absl::MutexLock lock(&mu_);
  return {counters_.begin(), counters_.end()};
}

void StreamService::RecordError(absl::StatusCode code) {
  const size_t i = static_cast<size_t>(code);
  absl::MutexLock lock(&mu_);
  if (i < errors_.size()) ++errors_[i];
}

std::array<int64_t, 17> StreamService::Errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

StreamService::Stats StreamService::GetStats() const {
  Stats s;
  static_cast<Admission::Stats&>(s) = admission_->GetStats();
  for (const auto& [name, ds] : catalog()->datasets()) {
    s.datasets.push_back({name, ds->Damage(),
                          ds->has_source() ? std::make_optional(
                                                 ds->remote_stats())
                                           : std::nullopt});
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [key, runs] : runs_) {
    for (const auto& weak : runs) s.shared_runs += weak.expired() ? 0 : 1;
  }
  s.share_fallbacks = share_fallbacks_;
  return s;
}

}  // namespace stoker::service
