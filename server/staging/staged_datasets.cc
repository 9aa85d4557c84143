#include "server/staging/staged_datasets.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/metrics/log.h"
#include "server/staging/range_read_policy.h"
#include "server/storage/url.h"

namespace stoker::staging {
namespace {

namespace fs = std::filesystem;
using metrics::Log;
using metrics::LogLevel;

std::string Mib(uint64_t n) {
  return absl::StrFormat("%.1f MiB (%d bytes)",
                         static_cast<double>(n) / 1048576.0, n);
}

// Bytes a staged dataset holds on local disk, or has reserved there: a
// copy under way passed its check for all of them.
uint64_t Held(const StageStatus& s) {
  return s.state == StageStatus::State::kComplete ||
                 s.state == StageStatus::State::kCopying
             ? s.bytes_total
             : s.bytes_done;
}

}  // namespace

storage::EnvLookup OverrideEnv(const StagingSettings& settings,
                               storage::EnvLookup base) {
  return [s = settings, base = std::move(base)](
             const char* name) -> std::optional<std::string> {
    const auto is = [name](const char* n) { return std::strcmp(name, n) == 0; };
    if (!s.s3_region.empty() &&
        (is("AWS_REGION") || is("AWS_DEFAULT_REGION"))) {
      return s.s3_region;
    }
    if (!s.s3_endpoint.empty() &&
        (is("AWS_ENDPOINT_URL_S3") || is("AWS_ENDPOINT_URL"))) {
      return s.s3_endpoint;
    }
    if (!s.s3_profile.empty() && is("AWS_PROFILE")) return s.s3_profile;
    if (!s.s3_credentials_file.empty() && is("AWS_SHARED_CREDENTIALS_FILE")) {
      return s.s3_credentials_file;
    }
    return base(name);
  };
}

StagedDatasets::StagedDatasets(StagingSettings settings, OnServable on_servable,
                               std::function<void(const std::string&)> on_evict,
                               std::function<bool(const std::string&)> in_use)
    : settings_(std::move(settings)),
      on_servable_(std::move(on_servable)),
      on_evict_(std::move(on_evict)),
      in_use_(std::move(in_use)) {}

StagedDatasets::~StagedDatasets() { Stop(); }

absl::StatusOr<std::unique_ptr<Stager>> StagedDatasets::MakeStager(
    const Entry& e) {
  Stager::Options o;
  o.name = e.name;
  o.path = e.path;
  o.source = e.source;
  o.store = settings_.store;
  o.store.env = OverrideEnv(settings_, settings_.store.env);
  o.parallel = settings_.parallel;
  o.chunk_bytes = settings_.chunk_bytes;
  o.piece_bytes = settings_.piece_bytes;
  if (settings_.policy) {
    o.policy = settings_.policy(e.name);
  } else if (absl::StatusOr<storage::Location> l =
                 storage::ParseLocation(e.source);
             l.ok()) {
    // Served while staging; a bad source fails in Stager::Create.
    o.policy = std::make_unique<RangeReadPolicy>(*l, o.store,
                                                 settings_.remote);
  }
  o.free_bytes = settings_.free_bytes;
  const std::string name = e.name;
  o.reserve = [this, name](uint64_t bytes) { return Reserve(name, bytes); };
  o.on_servable = [this, name](std::shared_ptr<const dataset::Dataset> ds) {
    Servable(name, std::move(ds));
  };
  return Stager::Create(std::move(o));
}

absl::Status StagedDatasets::Update(const std::vector<Entry>& entries) {
  std::map<std::string, std::unique_ptr<Stager>> made;
  {
    absl::MutexLock lock(&mu_);
    for (const Entry& e : entries) {
      auto it = slots_.find(e.name);
      // An unchanged dataset keeps its copy, unless that failed: a reload
      // tries a failed one again.
      if (it != slots_.end() && it->second.entry == e &&
          (it->second.stager == nullptr ||
           it->second.stager->status().state != StageStatus::State::kFailed)) {
        continue;
      }
      absl::StatusOr<std::unique_ptr<Stager>> s = MakeStager(e);
      if (!s.ok()) return s.status();
      made[e.name] = *std::move(s);
    }
  }
  std::vector<std::unique_ptr<Stager>> stop;
  std::vector<Stager*> start;
  {
    absl::MutexLock lock(&mu_);
    std::set<std::string> named;
    for (const Entry& e : entries) {
      named.insert(e.name);
      auto m = made.find(e.name);
      if (m == made.end()) continue;  // Kept: its copy goes on.
      Slot& slot = slots_[e.name];
      if (slot.stager != nullptr) stop.push_back(std::move(slot.stager));
      slot = Slot{e, std::move(m->second), nullptr, absl::InfinitePast()};
      if (started_) start.push_back(slot.stager.get());
    }
    for (auto it = slots_.begin(); it != slots_.end();) {
      if (named.count(it->first) != 0) {
        ++it;
        continue;
      }
      if (it->second.stager != nullptr) {
        stop.push_back(std::move(it->second.stager));
      }
      it = slots_.erase(it);
    }
    for (auto& r : retired_) stop.push_back(std::move(r));
    retired_.clear();
  }
  for (auto& s : stop) s->Stop();
  for (Stager* s : start) s->Start();
  return absl::OkStatus();
}

void StagedDatasets::Start() {
  absl::MutexLock lock(&mu_);
  started_ = true;
  // Stager::Start only spawns the thread, which calls in after this.
  for (auto& [name, slot] : slots_) {
    if (slot.stager != nullptr) slot.stager->Start();
  }
}

void StagedDatasets::Stop() {
  std::vector<std::unique_ptr<Stager>> stop;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, slot] : slots_) {
      if (slot.stager != nullptr) stop.push_back(std::move(slot.stager));
    }
    slots_.clear();
    for (auto& r : retired_) stop.push_back(std::move(r));
    retired_.clear();
  }
  for (auto& s : stop) s->Stop();
}

StagedDatasets::Lookup StagedDatasets::Find(const std::string& name) {
  Stager* start = nullptr;
  Lookup out;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(name);
    if (it == slots_.end()) return out;
    Slot& slot = it->second;
    out.staged = true;
    if (slot.stager == nullptr) {
      // Evicted by the cache limit: staged again for this stream.
      absl::StatusOr<std::unique_ptr<Stager>> s = MakeStager(slot.entry);
      if (!s.ok()) {
        out.failed = true;
        out.error = s.status();
        out.progress = std::string(s.status().message());
        return out;
      }
      slot.stager = *std::move(s);
      start = slot.stager.get();
      Log(LogLevel::kInfo, "stage_again",
          {{"dataset", name}, {"reason", "a stream asked for it"}});
    }
    const StageStatus s = slot.stager->status();
    out.servable = slot.servable != nullptr;
    out.failed = s.state == StageStatus::State::kFailed;
    out.error = s.error;
    out.progress = DescribeProgress(s);
  }
  if (start != nullptr) start->Start();
  return out;
}

std::map<std::string, std::shared_ptr<const dataset::Dataset>>
StagedDatasets::Servable() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::shared_ptr<const dataset::Dataset>> out;
  for (const auto& [name, slot] : slots_) {
    if (slot.servable != nullptr) out[name] = slot.servable;
  }
  return out;
}

std::vector<StageStatus> StagedDatasets::Statuses() {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, slot] : slots_) names.push_back(name);
  }
  std::set<std::string> used;
  for (const std::string& n : names) {
    if (in_use_ && in_use_(n)) used.insert(n);
  }
  const absl::Time now = absl::Now();
  std::vector<StageStatus> out;
  absl::MutexLock lock(&mu_);
  for (auto& [name, slot] : slots_) {
    if (used.count(name) != 0) slot.last_used = now;
    if (slot.stager != nullptr) out.push_back(slot.stager->status());
  }
  return out;
}

void StagedDatasets::Servable(const std::string& name,
                              std::shared_ptr<const dataset::Dataset> ds) {
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(name);
    if (it == slots_.end()) return;
    it->second.servable = ds;
    it->second.last_used = absl::Now();
  }
  if (on_servable_) on_servable_(name, std::move(ds));
}

absl::Status StagedDatasets::Reserve(const std::string& name, uint64_t bytes) {
  if (settings_.cache_limit == 0) return absl::OkStatus();
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [n, slot] : slots_) names.push_back(n);
  }
  std::set<std::string> used;
  for (const std::string& n : names) {
    if (in_use_ && in_use_(n)) used.insert(n);
  }
  struct Victim {
    std::string name, path;
  };
  std::vector<Victim> evict;
  std::vector<std::unique_ptr<Stager>> done;
  {
    absl::MutexLock lock(&mu_);
    uint64_t held = 0;
    // Complete, not in use: may go, least recently used first.
    std::vector<std::pair<absl::Time, std::string>> candidates;
    std::vector<std::string> kept;
    for (const auto& [n, slot] : slots_) {
      if (n == name || slot.stager == nullptr) continue;
      const StageStatus s = slot.stager->status();
      held += Held(s);
      if (s.state == StageStatus::State::kComplete && used.count(n) == 0) {
        candidates.emplace_back(slot.last_used, n);
      } else if (Held(s) > 0) {
        kept.push_back(n);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    const uint64_t limit = settings_.cache_limit;
    size_t next = 0;
    while (held + bytes > limit && next < candidates.size()) {
      held -= Held(slots_[candidates[next++].second].stager->status());
    }
    if (held + bytes > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the copy needs ", Mib(bytes), " more; storage.cache_limit is ",
          Mib(limit), " and ", Mib(held),
          " of it is held by staged "
          "datasets that are in use or being staged (",
          kept.empty() ? "none" : absl::StrJoin(kept, ", "), ")"));
    }
    for (size_t i = 0; i < next; ++i) {
      Slot& slot = slots_[candidates[i].second];
      evict.push_back({slot.entry.name, slot.entry.path});
      done.push_back(std::move(slot.stager));
      slot.servable = nullptr;
    }
  }
  // A finished stager's thread no longer calls in: joining it is quick.
  for (auto& s : done) s->Stop();
  for (const Victim& v : evict) {
    if (on_evict_) on_evict_(v.name);
    std::error_code ec;
    fs::remove_all(v.path, ec);
    Log(LogLevel::kInfo, "stage_evicted",
        {{"dataset", v.name},
         {"path", v.path},
         {"for", name},
         {"reason", "storage.cache_limit"}});
  }
  return absl::OkStatus();
}

}  // namespace stoker::staging
