// Stager: copies one dataset with a `source` onto local disk in the
// background, for stokerd, and says when it can be served.
//
// Start() runs a thread that pulls the source into the dataset's `path`
// with Pull's machinery (storage/transfer.h): the remote manifest first,
// then every record index, then the shards; each file checked before it
// is published, the manifest published last, a killed copy resumed. On
// the way it:
//   - holds Pull's lock on `path`. Several daemons of one host may name the
//     same `path`: the second one finds the lock taken, logs the holder's
//     pid, and waits for that copy; when it completes, its own pull finds
//     the same manifest in place and uses the copy without fetching it.
//   - checks the free space of `path`'s disk, and the cache limit, before
//     the first byte (Options::reserve, Options::free_bytes): a dataset
//     that cannot fit fails naming the sizes.
//   - logs the start and end of the copy; an error names the dataset, and
//     Pull's message the shard, the URL (never a credential) and the HTTP
//     status.
//
// The moment it becomes servable (the hook). After the manifest is read,
// and after each file is published, the stager asks its ServePolicy
// whether the dataset can be served now. The first time it says yes the
// stager calls policy->Open() and hands the dataset it returns to
// Options::on_servable, once; stokerd then adds it to its catalog, and
// streams waiting for it go on. CopyCompletePolicy (the default) says yes
// once the whole copy is published and opens the local copy. A policy that
// reads records of missing shards by range from the source can say yes as
// soon as the manifest and the record indexes are local
// (StageView::indexes_local), and learns of each shard published after
// that through OnPublished() (to switch its reads to the local file).
//
// Thread-safe. Owns one thread, started by Start() and joined by Stop()
// (which stops the copy within about a second: an HTTP or S3 transfer in
// flight is aborted; published files are kept for a resume); the
// destructor calls Stop().
#ifndef STOKER_SERVER_STAGING_STAGER_H_
#define STOKER_SERVER_STAGING_STAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/dataset/dataset.h"
#include "server/dataset/manifest.h"
#include "server/dataset/part_files.h"
#include "server/staging/stage_status.h"
#include "server/storage/store.h"
#include "server/storage/transfer.h"

namespace stoker::staging {

// What a ServePolicy sees of a dataset being staged. Valid only during the
// call it is handed to.
struct StageView {
  const std::string& name;  // The dataset's name in the config.
  const std::string& path;  // Where the local copy is being written.
  const dataset::Manifest& manifest;
  storage::Store& source;  // Lives as long as the stager.
  // The shard and index files published in `path` so far, by name.
  const std::set<std::string>& published;
  bool complete;  // The whole copy and its manifest are published.
  // The part files of the copy under way, shared with the ranged reads of
  // a dataset served while staging (part_files.h); lives as long as
  // whoever holds it.
  std::shared_ptr<dataset::PartFiles> parts;

  // Every record index the manifest names is published (false for a pack
  // without record indexes).
  bool indexes_local() const;
};

// Decides when a dataset being staged can be served, and opens it.
// Called from the stager's thread (OnPublished also from Pull's), one call
// at a time.
class ServePolicy {
 public:
  virtual ~ServePolicy() = default;
  // Whether the dataset may be served now.
  virtual bool Servable(const StageView& view) = 0;
  // Opens the dataset for serving; called once, the first time Servable
  // says yes. An error fails the staging.
  virtual absl::StatusOr<std::shared_ptr<const dataset::Dataset>> Open(
      const StageView& view) = 0;
  // A shard or index file was published, after the dataset was opened.
  virtual void OnPublished(const StageView& view, const std::string& file) {
    (void)view;
    (void)file;
  }
};

// Servable once the copy is complete; opens the local copy.
class CopyCompletePolicy : public ServePolicy {
 public:
  bool Servable(const StageView& view) override { return view.complete; }
  absl::StatusOr<std::shared_ptr<const dataset::Dataset>> Open(
      const StageView& view) override;
};

class Stager {
 public:
  struct Options {
    std::string name;    // The dataset's name in the config.
    std::string path;    // The local copy.
    std::string source;  // As written in the config.
    storage::StoreOptions store;
    int parallel = 8;
    uint64_t chunk_bytes = uint64_t{16} << 20;
    // Pieces of a chunk while the part files are shared (TransferOptions).
    uint64_t piece_bytes = uint64_t{512} << 10;
    // Null: CopyCompletePolicy.
    std::unique_ptr<ServePolicy> policy;
    // Free bytes of the disk that holds `path` (statvfs); tests inject.
    std::function<absl::StatusOr<uint64_t>(const std::string&)> free_bytes;
    // Asked with the bytes the copy still needs, after the free-space
    // check; an error fails the staging (the cache limit). May be empty.
    std::function<absl::Status(uint64_t)> reserve;
    // Told the dataset once it is servable (on the stager's thread).
    std::function<void(std::shared_ptr<const dataset::Dataset>)> on_servable;
    // How often a stager that found `path` locked by another process
    // tries again.
    absl::Duration lock_poll = absl::Milliseconds(250);
  };

  // InvalidArgument naming the dataset for a source that is not a
  // location; the store's error, naming the dataset, for a store that
  // cannot be made (S3 settings).
  static absl::StatusOr<std::unique_ptr<Stager>> Create(Options options);
  ~Stager();
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  void Start();
  // Stops the copy and joins. Idempotent.
  void Stop();

  // The copy's state now.
  StageStatus status() const;
  // Waits until the dataset is servable or the staging ended (failed,
  // stopped) or `timeout` passed; returns whether it is servable.
  bool WaitServable(absl::Duration timeout) const;
  // Waits until the thread is done (copy complete, failed or stopped) or
  // `timeout` passed; returns whether it is done.
  bool WaitDone(absl::Duration timeout) const;

  const std::string& name() const { return options_.name; }

 private:
  Stager(Options options, std::unique_ptr<ServePolicy> policy);

  void Run();
  absl::Status Copy();
  absl::Status Reserve(uint64_t bytes);
  // After a failed copy: whether `path` holds a complete earlier copy of
  // the dataset, which then is served (the source may be down).
  bool UseLocalCopy(const absl::Status& why);
  void OnManifest(const dataset::Manifest& m);
  void OnPublished(const std::string& file);
  void OnProgress(const storage::TransferProgress& p);
  // Asks the policy; opens and hands over the dataset the first time it
  // says yes. Returns an error if opening failed.
  absl::Status MaybeServe(const std::string* published_file)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CountRetry(const absl::Status& s);
  StageStatus StatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after Create.
  const Options options_;  // Without its policy.
  const std::unique_ptr<ServePolicy> policy_;
  std::unique_ptr<storage::Store> store_;
  // Shared by the copy (TransferOptions::parts) and the policy's dataset.
  const std::shared_ptr<dataset::PartFiles> parts_ =
      std::make_shared<dataset::PartFiles>();

  std::atomic<bool> stop_{false};
  std::thread thread_;

  // Serializes the policy's calls.
  absl::Mutex policy_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  bool opened_ ABSL_GUARDED_BY(policy_mu_) = false;

  mutable absl::Mutex mu_;
  StageStatus status_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<dataset::Manifest> manifest_ ABSL_GUARDED_BY(mu_);
  // The dataset the policy opened, for the records it read by range
  // (StageStatus::remote_records); weak, so that the catalog alone keeps
  // it alive.
  std::weak_ptr<const dataset::Dataset> served_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> published_ ABSL_GUARDED_BY(mu_);
  // The most bytes the served dataset's ranged reads had fetched when last
  // asked: kept when the dataset is gone, so the count never goes down.
  mutable uint64_t remote_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool copied_ ABSL_GUARDED_BY(mu_) = false;  // Pull returned OK.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker::staging

#endif  // STOKER_SERVER_STAGING_STAGER_H_
