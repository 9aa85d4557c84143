#include "server/service/stream_service.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker::service {
namespace {

std::string Bytes(uint64_t n) {
  if (n >= (1ull << 30)) return absl::StrFormat("%.1f GiB", n / 1073741824.0);
  if (n >= (1ull << 20)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  return absl::StrCat(n, " bytes");
}

}  // namespace

StreamTicket::StreamTicket(std::shared_ptr<Admission> admission, uint64_t id,
                           uint64_t bytes)
    : admission_(std::move(admission)), id_(id), bytes_(bytes) {}

StreamTicket::~StreamTicket() {
  absl::MutexLock lock(&admission_->mu);
  admission_->bytes_reserved -= bytes_;
  admission_->open_streams -= 1;
  admission_->streams.erase(id_);
}

StreamService::StreamService(pipeline::WorkerPool* pool,
                             ServiceOptions options,
                             std::shared_ptr<const Catalog> catalog)
    : pool_(pool),
      options_(options),
      admission_(std::make_shared<Admission>()),
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
  if (spec.job_id.size() > 256) {
    return absl::InvalidArgumentError("job_id is longer than 256 bytes");
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenedStream> StreamService::Open(const StreamSpec& spec) {
  if (absl::Status s = Validate(spec); !s.ok()) return s;
  std::shared_ptr<const Catalog> catalog;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError("stokerd is shutting down");
    }
    catalog = catalog_;
  }
  absl::StatusOr<const dataset::Dataset*> dataset =
      catalog->FindDataset(spec.dataset);
  if (!dataset.ok()) return dataset.status();
  absl::StatusOr<const pipeline::Pipeline*> pipe =
      catalog->FindPipeline(spec.pipeline);
  if (!pipe.ok()) return pipe.status();
  auto bound = (*pipe)->Bind(InputSchema((*dataset)->manifest()));
  if (!bound.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline '", spec.pipeline, "' cannot run on dataset '",
                     spec.dataset, "': ", bound.status().message()));
  }
  dataset::SamplerOptions so;
  so.num_samples = (*dataset)->num_samples();
  so.seed = spec.seed;
  so.batch_size = spec.batch_size;
  so.rank = spec.rank;
  so.world_size = spec.world_size;
  so.drop_last = spec.drop_last;
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

  BatchLayout layout((*bound)->outputs(), spec.batch_size);
  const uint64_t batch_bytes = layout.Bytes(spec.batch_size);
  if (batch_bytes > options_.max_batch_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", spec.batch_size, " is ", Bytes(batch_bytes),
                     ", over the bound max_batch_bytes=",
                     Bytes(options_.max_batch_bytes)));
  }
  const uint32_t prefetch =
      spec.prefetch == 0 ? options_.default_prefetch : spec.prefetch;
  const uint32_t window =
      prefetch + (spec.transport == "shm" ? std::max<uint32_t>(1, spec.hold) : 0);
  const uint64_t want = batch_bytes * window;

  Stream::Options options;
  options.spec = spec;
  options.spec.prefetch = prefetch;
  options.catalog = catalog;
  options.dataset = *dataset;
  options.pipeline = *std::move(bound);
  options.sampler = *std::move(sampler);
  options.pool = pool_;
  options.on_corrupt = options_.on_corrupt;
  options.counters = CountersFor(spec);

  absl::ReleasableMutexLock lock(&admission_->mu);
  if (admission_->open_streams >= options_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat(admission_->open_streams,
                     " streams are open, the bound max_streams=",
                     options_.max_streams));
  }
  if (admission_->bytes_reserved + want > options_.memory_budget) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory_budget ", Bytes(options_.memory_budget), " has ",
        Bytes(admission_->bytes_reserved), " in use; this stream asks for ",
        Bytes(want), " (", window, " batches of ", Bytes(batch_bytes),
        "): lower prefetch or batch_size"));
  }
  const uint64_t id = admission_->next_id++;
  admission_->bytes_reserved += want;
  admission_->open_streams += 1;
  options.group = pool_->AddGroup(spec.weight);
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
  opened.ticket = std::make_shared<StreamTicket>(admission_, id, want);
  opened.prefetch = prefetch;
  opened.window = window;
  opened.batch_bytes = batch_bytes;
  admission_->streams[id] = opened.stream;
  lock.Release();
  if (observer != nullptr) {
    observer->OnOpen(StreamSnapshot{id, opened.stream->spec(),
                                    opened.stream->steps_per_epoch(),
                                    opened.stream->stats()},
                     want);
  }
  return opened;
}

void StreamService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
  }
  std::vector<std::shared_ptr<Stream>> open;
  {
    absl::MutexLock lock(&admission_->mu);
    for (auto& [id, weak] : admission_->streams) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  for (auto& s : open) {
    s->Fail(absl::UnavailableError("stokerd is shutting down; reconnect"));
  }
}

std::vector<StreamSnapshot> StreamService::Snapshot() const {
  std::vector<std::pair<uint64_t, std::shared_ptr<Stream>>> open;
  {
    absl::MutexLock lock(&admission_->mu);
    for (const auto& [id, weak] : admission_->streams) {
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
  absl::MutexLock lock(&admission_->mu);
  return Stats{admission_->open_streams, admission_->bytes_reserved,
               options_.memory_budget};
}

}  // namespace stoker::service
