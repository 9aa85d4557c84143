// StokerServer's part in staging datasets with a `source`
// (server/staging/staged_datasets.h): the catalog changes a staged dataset
// makes, and what the open path and the metrics ask of it.
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/server_lib.h"
#include "server/service/staging_wait.h"

namespace stoker {
namespace {

std::vector<staging::StagedDatasets::Entry> StagedEntries(
    const config::ServerOptions& options) {
  std::vector<staging::StagedDatasets::Entry> out;
  for (const config::DatasetOptions& d : options.datasets) {
    if (!d.source.empty()) out.push_back({d.name, d.path, d.source});
  }
  return out;
}

}  // namespace

absl::Status StokerServer::CreateStaging(const config::ServerOptions& o) {
  staging::StagingSettings settings;
  settings.cache_limit = o.storage.cache_limit;
  settings.parallel = static_cast<int>(o.storage.parallel);
  settings.chunk_bytes = o.storage.chunk_size;
  settings.piece_bytes = o.storage.piece_size;
  settings.remote.parallel = static_cast<int>(o.storage.read_parallel);
  settings.remote.ahead_batches = o.storage.read_ahead;
  settings.remote.cache_bytes = o.storage.read_cache;
  settings.remote.block_bytes = o.storage.read_block;
  settings.store.http.retry.max_attempts =
      1 + static_cast<int>(o.storage.retries);
  settings.s3_region = o.storage.s3_region;
  settings.s3_endpoint = o.storage.s3_endpoint;
  settings.s3_profile = o.storage.s3_profile;
  settings.s3_credentials_file = o.storage.s3_credentials_file;
  service::StreamService* const service = service_.get();
  staged_ = std::make_unique<staging::StagedDatasets>(
      std::move(settings),
      [this](const std::string& name,
             std::shared_ptr<const dataset::Dataset> ds) {
        AddServable(name, std::move(ds));
      },
      [this](const std::string& name) { RemoveEvicted(name); },
      [service](const std::string& name) {
        for (const service::StreamSnapshot& s : service->Snapshot()) {
          if (s.spec.dataset == name) return true;
        }
        return false;
      });
  return UpdateStaging(o);
}

absl::Status StokerServer::UpdateStaging(const config::ServerOptions& o) {
  absl::Status s = staged_->Update(StagedEntries(o));
  if (s.ok()) return s;
  for (const config::DatasetOptions& d : o.datasets) {
    if (absl::StrContains(s.message(), absl::StrCat("'", d.name, "'"))) {
      return absl::Status(
          s.code(), absl::StrCat(o.source, ":", d.line, ": ", s.message()));
    }
  }
  return absl::Status(s.code(), absl::StrCat(o.source, ": ", s.message()));
}

absl::Status StokerServer::StagingLookup(const std::string& dataset) const {
  if (staged_ == nullptr) return absl::OkStatus();
  const staging::StagedDatasets::Lookup l = staged_->Find(dataset);
  if (!l.staged) return absl::OkStatus();
  if (l.failed) {
    // It stays failed until a reload tries it again, so an open retried
    // cannot succeed: a source that was down is FailedPrecondition here,
    // not the Unavailable that clients retry.
    return absl::Status(
        absl::IsUnavailable(l.error) ? absl::StatusCode::kFailedPrecondition
                                     : l.error.code(),
        absl::StrCat(l.error.message(),
                     " (the staging failed; a reload, SIGHUP, tries it "
                     "again)"));
  }
  return service::StagingStatus(dataset,
                                l.servable ? "copied; opening it" : l.progress);
}

void StokerServer::AddServable(const std::string& name,
                               std::shared_ptr<const dataset::Dataset> ds) {
  absl::MutexLock lock(&catalog_mu_);
  service_->SetCatalog(service_->catalog()->WithDataset(name, std::move(ds)));
}

void StokerServer::RemoveEvicted(const std::string& name) {
  absl::MutexLock lock(&catalog_mu_);
  service_->SetCatalog(service_->catalog()->WithoutDataset(name));
}

std::vector<staging::StageStatus> StokerServer::StagingStats() const {
  if (staged_ == nullptr) return {};
  return staged_->Statuses();
}

}  // namespace stoker
