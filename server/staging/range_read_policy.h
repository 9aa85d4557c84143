// The ServePolicy (stager.h) that serves a dataset while it is staged: it
// is servable as soon as the manifest and every record index are local,
// and records of the shards not copied yet are read by range from the
// source (Dataset::OpenStaging, docs/storage.md "Serving while staging").
// Each shard published after that switches to its local file
// (Dataset::PublishShard). A pack without record indexes is servable once
// its copy is complete, as with CopyCompletePolicy.
//
// The dataset reads the source through a store of its own, opened from the
// same location and settings as the stager's: the catalog may keep the
// dataset after its stager is gone (a reload), so it must not borrow the
// stager's.
//
// Thread-compatible: the stager calls it one call at a time.
#ifndef STOKER_SERVER_STAGING_RANGE_READ_POLICY_H_
#define STOKER_SERVER_STAGING_RANGE_READ_POLICY_H_

#include <memory>
#include <string>

#include "server/dataset/dataset.h"
#include "server/staging/stager.h"
#include "server/storage/store.h"
#include "server/storage/url.h"

namespace stoker::staging {

class RangeReadPolicy : public ServePolicy {
 public:
  RangeReadPolicy(storage::Location source, storage::StoreOptions store,
                  dataset::RemoteOptions remote = {});

  bool Servable(const StageView& view) override;
  absl::StatusOr<std::shared_ptr<const dataset::Dataset>> Open(
      const StageView& view) override;
  void OnPublished(const StageView& view, const std::string& file) override;

 private:
  const storage::Location source_;
  const storage::StoreOptions store_;
  const dataset::RemoteOptions remote_;
  // The dataset Open made while shards were remote; null otherwise. Shared
  // with the catalog, which serves it; kept here to publish shards into.
  std::shared_ptr<dataset::Dataset> staging_;
};

}  // namespace stoker::staging

#endif  // STOKER_SERVER_STAGING_RANGE_READ_POLICY_H_
