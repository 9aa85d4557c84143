// StagedDatasets: every dataset of the config with a `source`, each staged
// by its own Stager (stager.h), and the local space they share
// (storage.cache_limit). stokerd owns one.
//
// The composition root hands it the datasets with a source (Update, at
// start and at each reload) and three functions: `on_servable` adds a
// dataset that became servable to the catalog, `on_evict` takes one out,
// `in_use` says whether a stream has it open. A reload keeps the stager of
// a dataset whose name, path and source are unchanged (its copy goes on),
// stops those no longer named, starts the new ones. A staging that failed
// stays failed (opens on it fail with its error) until a reload, which
// tries it again.
//
// The cache limit. Before a copy fetches its first byte, the bytes it
// still needs are weighed against the limit, with the bytes every other
// staged dataset holds on disk. If they would exceed it, complete staged
// datasets that no stream has open are removed, least recently used first
// (used: a stream seen open on it, or the moment it became servable),
// until the new one fits; a dataset that cannot fit even then fails with
// the sizes. A dataset without a source is never removed (it is not here).
// An evicted dataset is staged again when a stream asks for it.
//
// Thread-safe.
#ifndef STOKER_SERVER_STAGING_STAGED_DATASETS_H_
#define STOKER_SERVER_STAGING_STAGED_DATASETS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/dataset/dataset.h"
#include "server/staging/stage_status.h"
#include "server/staging/stager.h"
#include "server/storage/store.h"

namespace stoker::staging {

struct StagingSettings {
  uint64_t cache_limit = 0;  // 0: none.
  int parallel = 8;
  uint64_t chunk_bytes = uint64_t{16} << 20;
  uint64_t piece_bytes = uint64_t{512} << 10;
  // Records read by range while a dataset is copied (RangeReadPolicy).
  dataset::RemoteOptions remote;
  // S3 settings over the AWS environment; empty: the environment's.
  std::string s3_region, s3_endpoint, s3_profile, s3_credentials_file;
  storage::StoreOptions store;  // Its env is wrapped by the s3_* settings.
  // Tests inject these; empty: statvfs, and RangeReadPolicy (served while
  // staging, from the moment the record indexes are local).
  std::function<absl::StatusOr<uint64_t>(const std::string&)> free_bytes;
  std::function<std::unique_ptr<ServePolicy>(const std::string& name)> policy;
};

// `base` with AWS_REGION, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL, AWS_PROFILE and AWS_SHARED_CREDENTIALS_FILE answered
// from the settings where they are set.
storage::EnvLookup OverrideEnv(const StagingSettings& settings,
                               storage::EnvLookup base);

class StagedDatasets {
 public:
  struct Entry {
    std::string name, path, source;
    bool operator==(const Entry& o) const {
      return name == o.name && path == o.path && source == o.source;
    }
  };
  using OnServable = std::function<void(
      const std::string& name, std::shared_ptr<const dataset::Dataset>)>;

  // The functions may be called from the stagers' threads; they must not
  // call back into this object.
  StagedDatasets(StagingSettings settings, OnServable on_servable,
                 std::function<void(const std::string&)> on_evict,
                 std::function<bool(const std::string&)> in_use);
  ~StagedDatasets();

  // Checks every entry's source (InvalidArgument naming the dataset) and
  // makes, keeps or stops stagers to match `entries`; after Start(), new
  // ones start at once. Nothing changes on an error.
  absl::Status Update(const std::vector<Entry>& entries)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the copies.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops every copy (published files stay, for the next start).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // For StreamService's StagingLookup: OK for a dataset not staged here;
  // a staging status (service/staging_wait.h is the caller's) is built by
  // the caller from Progress().
  struct Lookup {
    bool staged = false;  // The name is a dataset with a source.
    bool failed = false;
    bool servable = false;
    std::string progress;  // DescribeProgress, or the failure.
    absl::Status error;    // When failed.
  };
  Lookup Find(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);

  // The servable datasets, by name (a reload puts them in its catalog).
  std::map<std::string, std::shared_ptr<const dataset::Dataset>> Servable()
      ABSL_LOCKS_EXCLUDED(mu_);

  // Every staged dataset's status, by name; marks those in use as used.
  std::vector<StageStatus> Statuses() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Slot {
    Entry entry;
    std::unique_ptr<Stager> stager;  // Null once evicted.
    std::shared_ptr<const dataset::Dataset> servable;
    absl::Time last_used = absl::InfinitePast();
  };

  absl::StatusOr<std::unique_ptr<Stager>> MakeStager(const Entry& e);
  // The cache limit's check for `name`, which needs `bytes` more.
  absl::Status Reserve(const std::string& name, uint64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Servable(const std::string& name,
                std::shared_ptr<const dataset::Dataset> ds)
      ABSL_LOCKS_EXCLUDED(mu_);

  const StagingSettings settings_;
  const OnServable on_servable_;
  const std::function<void(const std::string&)> on_evict_;
  const std::function<bool(const std::string&)> in_use_;

  absl::Mutex mu_;
  std::map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // Stagers taken out of slots_ (a reload, an eviction), stopped outside
  // mu_ since their threads call back in.
  std::vector<std::unique_ptr<Stager>> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::staging

#endif  // STOKER_SERVER_STAGING_STAGED_DATASETS_H_
