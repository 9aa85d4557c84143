#include "server/staging/stager.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/file_util.h"
#include "server/metrics/log.h"
#include "server/storage/url.h"

namespace stoker::staging {
namespace {

namespace fs = std::filesystem;
using metrics::Log;
using metrics::LogLevel;

absl::StatusOr<uint64_t> StatvfsFree(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("statvfs ", path));
  }
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string Mib(uint64_t n) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(n) / 1048576.0);
}

}  // namespace

bool StageView::indexes_local() const {
  if (manifest.shards.empty()) return false;
  for (const dataset::ShardInfo& s : manifest.shards) {
    if (!s.has_index() || published.count(s.index_file) == 0) return false;
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const dataset::Dataset>>
CopyCompletePolicy::Open(const StageView& view) {
  absl::StatusOr<std::unique_ptr<dataset::Dataset>> ds =
      dataset::Dataset::Open(view.name, view.path);
  if (!ds.ok()) return ds.status();
  return std::shared_ptr<const dataset::Dataset>(*std::move(ds));
}

absl::StatusOr<std::unique_ptr<Stager>> Stager::Create(Options options) {
  absl::StatusOr<storage::Location> location =
      storage::ParseLocation(options.source);
  if (!location.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", options.name, "': source: ", location.status().message()));
  }
  std::unique_ptr<ServePolicy> policy = std::move(options.policy);
  if (policy == nullptr) policy = std::make_unique<CopyCompletePolicy>();
  std::unique_ptr<Stager> stager(
      new Stager(std::move(options), std::move(policy)));
  // Every retry of the store's requests is counted, by status.
  storage::StoreOptions store = stager->options_.store;
  Stager* const self = stager.get();
  std::function<void(const absl::Status&)> outer = store.http.on_retry;
  store.http.on_retry = [self, outer](const absl::Status& s) {
    self->CountRetry(s);
    if (outer) outer(s);
  };
  // Stop() need not wait for a chunk in flight on a slow link.
  store.http.cancelled = [self] { return self->stop_.load(); };
  absl::StatusOr<std::unique_ptr<storage::Store>> opened =
      storage::OpenStore(*location, store);
  if (!opened.ok()) {
    return absl::Status(
        opened.status().code(),
        absl::StrCat("dataset '", stager->options_.name, "': source ",
                     location->Display(), ": ", opened.status().message()));
  }
  stager->store_ = *std::move(opened);
  stager->status_.source = stager->store_->Display();
  return stager;
}

Stager::Stager(Options options, std::unique_ptr<ServePolicy> policy)
    : options_(std::move(options)), policy_(std::move(policy)) {
  status_.dataset = options_.name;
  status_.path = options_.path;
}

Stager::~Stager() { Stop(); }

void Stager::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void Stager::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

StageStatus Stager::status() const {
  absl::MutexLock lock(&mu_);
  return StatusLocked();
}

StageStatus Stager::StatusLocked() const {
  StageStatus s = status_;
  if (std::shared_ptr<const dataset::Dataset> ds = served_.lock()) {
    const dataset::RemoteReadStats remote = ds->remote_stats();
    s.remote_records = remote.records;
    remote_bytes_ = std::max(remote_bytes_, remote.bytes);
  }
  // The records read by range crossed the link too (and the copy did not
  // fetch them again).
  s.bytes_moved += remote_bytes_;
  return s;
}

bool Stager::WaitServable(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return status_.servable || status_.state == StageStatus::State::kFailed ||
           status_.state == StageStatus::State::kStopped;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  return status_.servable;
}

bool Stager::WaitDone(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  const auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return status_.state == StageStatus::State::kComplete ||
           status_.state == StageStatus::State::kFailed ||
           status_.state == StageStatus::State::kStopped;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void Stager::Run() {
  const absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    status_.started = start;
  }
  Log(LogLevel::kInfo, "stage_start",
      {{"dataset", options_.name},
       {"source", store_->Display()},
       {"path", options_.path}});
  absl::Status s = Copy();
  if (!s.ok() && !stop_ && UseLocalCopy(s)) s = absl::OkStatus();
  if (s.ok()) s = MaybeServe(nullptr);
  const absl::Time end = absl::Now();
  StageStatus final;
  {
    absl::MutexLock lock(&mu_);
    status_.finished = end;
    if (s.ok()) {
      status_.state = StageStatus::State::kComplete;
    } else if (stop_ && absl::IsCancelled(s)) {
      status_.state = StageStatus::State::kStopped;
    } else {
      status_.state = StageStatus::State::kFailed;
      status_.error = absl::Status(
          s.code(), absl::StrCat("staging dataset '", options_.name, "' from ",
                                 store_->Display(), " into ", options_.path,
                                 ": ", s.message()));
      ++status_.errors[ErrorClass(s)];
    }
    final = StatusLocked();
  }
  const double seconds = absl::ToDoubleSeconds(end - start);
  if (final.state == StageStatus::State::kComplete) {
    Log(LogLevel::kInfo, "stage_end",
        {{"dataset", options_.name},
         {"bytes", absl::StrCat(final.bytes_total)},
         {"fetched", absl::StrCat(final.bytes_moved)},
         {"resumed", absl::StrCat(final.bytes_resumed)},
         {"seconds", absl::StrFormat("%.2f", seconds)},
         {"retries", absl::StrCat(final.retries)}});
  } else if (final.state == StageStatus::State::kStopped) {
    Log(LogLevel::kInfo, "stage_stopped",
        {{"dataset", options_.name},
         {"done", absl::StrFormat("%.1f%%", final.percent())}});
  } else {
    Log(LogLevel::kError, "stage_failed",
        {{"dataset", options_.name},
         {"status", ErrorClass(s)},
         {"error", std::string(final.error.message())}});
  }
}

absl::Status Stager::Copy() {
  std::error_code ec;
  fs::create_directories(options_.path, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(),
                               absl::StrCat("cannot create ", options_.path));
  }
  storage::TransferOptions t;
  t.parallel = options_.parallel;
  t.chunk_bytes = options_.chunk_bytes;
  t.piece_bytes = options_.piece_bytes;
  t.progress = [this](const storage::TransferProgress& p) { OnProgress(p); };
  t.notice = [this](const std::string& line) {
    Log(LogLevel::kInfo, "stage_notice",
        {{"dataset", options_.name}, {"notice", line}});
  };
  t.on_manifest = [this](const dataset::Manifest& m, const std::string&) {
    OnManifest(m);
  };
  t.reserve = [this](uint64_t bytes) { return Reserve(bytes); };
  t.on_published = [this](const std::string& file) { OnPublished(file); };
  t.cancelled = [this] { return stop_.load(); };
  t.parts = parts_;
  bool told_waiting = false;
  for (;;) {
    absl::StatusOr<storage::TransferReport> r =
        storage::Pull(*store_, options_.path, t);
    if (r.ok()) {
      absl::MutexLock lock(&mu_);
      status_.bytes_resumed = r->bytes_resumed;
      break;
    }
    if (!storage::IsDestLocked(r.status())) return r.status();
    // Another daemon of this host stages the same path: use its copy once
    // it is complete (the pull then finds the same manifest in place).
    if (!told_waiting) {
      told_waiting = true;
      Log(LogLevel::kWarning, "stage_waiting",
          {{"dataset", options_.name},
           {"reason", std::string(r.status().message())}});
      absl::MutexLock lock(&mu_);
      status_.state = StageStatus::State::kWaiting;
    }
    absl::MutexLock lock(&mu_);
    const auto stopping = [this] { return stop_.load(); };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.lock_poll);
    if (stop_) return absl::CancelledError("stopped");
  }
  absl::MutexLock lock(&mu_);
  status_.bytes_done = status_.bytes_total;
  status_.files_done = status_.files_total;
  status_.shards_done = status_.shards_total;
  copied_ = true;
  return absl::OkStatus();
}

bool Stager::UseLocalCopy(const absl::Status& why) {
  // A copy that was complete (its manifest published, no pull state left)
  // when the source became unreachable, or lost its files, is still the
  // dataset. Not when the source holds another manifest: that is a new
  // version, which the copy must not hide.
  if (!absl::IsUnavailable(why) && !absl::IsNotFound(why)) return false;
  std::error_code ec;
  if (fs::exists(absl::StrCat(options_.path, "/", storage::kPullStateDir, "/",
                              dataset::kManifestFile),
                 ec)) {
    return false;  // A pull of it was under way.
  }
  const std::string path =
      absl::StrCat(options_.path, "/", dataset::kManifestFile);
  std::string text;
  if (!dataset::ReadFileToString(path, &text).ok()) return false;
  absl::StatusOr<dataset::Manifest> m = dataset::ParseManifest(text, path);
  if (!m.ok()) return false;
  Log(LogLevel::kWarning, "stage_source_unreachable",
      {{"dataset", options_.name},
       {"error", std::string(why.message())},
       {"using", absl::StrCat("the complete copy in ", options_.path)}});
  OnManifest(*m);
  absl::MutexLock lock(&mu_);
  status_.bytes_done = status_.bytes_total;
  status_.files_done = status_.files_total;
  status_.shards_done = status_.shards_total;
  copied_ = true;
  return true;
}

absl::Status Stager::Reserve(uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  absl::StatusOr<uint64_t> free = options_.free_bytes
                                      ? options_.free_bytes(options_.path)
                                      : StatvfsFree(options_.path);
  if (!free.ok()) return free.status();
  if (*free < bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the copy needs ", Mib(bytes), " (", bytes,
        " bytes) more, and the "
        "disk of ",
        options_.path, " has ", Mib(*free), " (", *free, " bytes) free"));
  }
  if (options_.reserve) return options_.reserve(bytes);
  return absl::OkStatus();
}

void Stager::OnManifest(const dataset::Manifest& m) {
  {
    absl::MutexLock lock(&mu_);
    manifest_ = std::make_unique<dataset::Manifest>(m);
    status_.state = StageStatus::State::kCopying;
    status_.shards_total = m.shards.size();
    status_.num_samples = m.num_samples;
    status_.files_total = 0;
    status_.bytes_total = 0;
    for (const dataset::ShardInfo& s : m.shards) {
      status_.bytes_total += s.bytes + (s.has_index() ? s.index_bytes : 0);
      status_.files_total += s.has_index() ? 2 : 1;
    }
  }
  // A policy may serve from the manifest alone; an error surfaces at the
  // end of the copy, where MaybeServe is asked again.
  (void)MaybeServe(nullptr);
}

void Stager::OnPublished(const std::string& file) {
  {
    absl::MutexLock lock(&mu_);
    published_.insert(file);
    if (manifest_ != nullptr) {
      for (const dataset::ShardInfo& s : manifest_->shards) {
        if (s.file == file) ++status_.shards_done;
      }
    }
  }
  (void)MaybeServe(&file);
}

void Stager::OnProgress(const storage::TransferProgress& p) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  status_.bytes_moved = p.bytes_moved;
  status_.bytes_done = p.bytes_done;
  status_.files_done = p.files_done;
  const double seconds = absl::ToDoubleSeconds(now - status_.started);
  if (seconds > 0) status_.rate = status_.bytes_moved / seconds;
}

absl::Status Stager::MaybeServe(const std::string* published_file) {
  absl::MutexLock policy_lock(&policy_mu_);
  std::set<std::string> published;
  std::unique_ptr<dataset::Manifest> manifest;
  bool complete;
  {
    absl::MutexLock lock(&mu_);
    if (manifest_ == nullptr) return absl::OkStatus();
    manifest = std::make_unique<dataset::Manifest>(*manifest_);
    published = published_;
    complete = copied_;
  }
  const StageView view{options_.name, options_.path, *manifest, *store_,
                       published,     complete,      parts_};
  if (opened_) {
    if (published_file != nullptr) policy_->OnPublished(view, *published_file);
    return absl::OkStatus();
  }
  if (!policy_->Servable(view)) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<const dataset::Dataset>> ds =
      policy_->Open(view);
  if (!ds.ok()) return ds.status();
  opened_ = true;
  Log(LogLevel::kInfo, "stage_servable",
      {{"dataset", options_.name}, {"complete", complete ? "yes" : "no"}});
  {
    absl::MutexLock lock(&mu_);
    served_ = *ds;
  }
  if (options_.on_servable) options_.on_servable(*ds);
  absl::MutexLock lock(&mu_);
  status_.servable = true;
  return absl::OkStatus();
}

void Stager::CountRetry(const absl::Status& s) {
  absl::MutexLock lock(&mu_);
  ++status_.retries;
  ++status_.errors[ErrorClass(s)];
}

}  // namespace stoker::staging
