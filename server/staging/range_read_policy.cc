#include "server/staging/range_read_policy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/metrics/log.h"
#include "server/storage/store_ranges.h"

namespace stoker::staging {

using metrics::Log;
using metrics::LogLevel;

RangeReadPolicy::RangeReadPolicy(storage::Location source,
                                 storage::StoreOptions store,
                                 dataset::RemoteOptions remote)
    : source_(std::move(source)),
      store_(std::move(store)),
      remote_(remote) {}

bool RangeReadPolicy::Servable(const StageView& view) {
  return view.complete || view.indexes_local();
}

absl::StatusOr<std::shared_ptr<const dataset::Dataset>> RangeReadPolicy::Open(
    const StageView& view) {
  if (view.complete) {
    absl::StatusOr<std::unique_ptr<dataset::Dataset>> ds =
        dataset::Dataset::Open(view.name, view.path);
    if (!ds.ok()) return ds.status();
    return std::shared_ptr<const dataset::Dataset>(*std::move(ds));
  }
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenStore(source_, store_);
  if (!store.ok()) return store.status();
  // Records read by range go into the copy's part files, and are read
  // from there once the copy has them (part_files.h).
  dataset::RemoteOptions remote = remote_;
  remote.parts = view.parts;
  absl::StatusOr<std::unique_ptr<dataset::Dataset>> ds =
      dataset::Dataset::OpenStaging(
          view.name, view.path, view.manifest,
          storage::StoreRanges(std::shared_ptr<storage::Store>(
              *std::move(store))),
          remote);
  if (!ds.ok()) return ds.status();
  staging_ = *std::move(ds);
  return std::shared_ptr<const dataset::Dataset>(staging_);
}

void RangeReadPolicy::OnPublished(const StageView& view,
                                  const std::string& file) {
  if (staging_ == nullptr) return;
  // A shard whose local file fails its open keeps being read by range; the
  // copy's own check of it has passed, so this is worth a warning only.
  if (absl::Status s = staging_->PublishShard(file); !s.ok()) {
    Log(LogLevel::kWarning, "stage_switch_failed",
        {{"dataset", view.name}, {"file", file}, {"error", s.ToString()}});
  }
  if (!staging_->staging()) staging_.reset();
}

}  // namespace stoker::staging
