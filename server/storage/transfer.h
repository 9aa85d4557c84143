// Pull and push: copying a packed dataset between a Store (store.h) and a
// local folder, checked and published so that a reader never sees half a
// dataset.
//
// Pull SOURCE -> DEST:
//   1. Locks DEST (an flock on DEST/.stoker-pull/lock): a second pull of the
//      same DEST fails at once, naming the holder's pid.
//   2. Reads SOURCE's manifest. A DEST whose manifest.json is the same text
//      is complete: nothing is fetched. A DEST with another manifest is
//      refused.
//   3. Fetches every record index, then every shard file, that DEST does
//      not hold yet (the indexes first: with them a reader can fetch single
//      records by range before the shards are in), in chunks of
//      `chunk_bytes`, `parallel` ranged GETs at a time,
//      each into DEST/.stoker-pull/FILE.part (each chunk, once synced,
//      recorded in the journal beside it). A file whose chunks are all
//      in is checked (its digest; a shard packed without one, record by
//      record), fsynced and renamed to DEST/FILE: it is published. A copy
//      that fails its check is fetched once more, then the pull fails with
//      DataLoss naming the shard and the URL.
//   4. Writes DEST/manifest.json last (temporary name, fsync, rename):
//      a DEST without a manifest is not a dataset.
// A pull that is killed resumes: the files already published are kept
// (they were checked before being renamed, and their size is checked
// again), and so are the ranges of part files that their journal names as
// durably written (part_journal.h); the rest is fetched. A resumed part
// file is checked whole, as any other, before it is published. The state
// remembers the manifest it was pulling; if SOURCE changed since, the
// files of the old one are removed first.
//
// Push DIR -> DEST uploads every shard and index (an S3 store uses
// multipart uploads for large ones), then manifest.json last. DEST holding
// another dataset's manifest is refused unless `force`.
//
// Thread-safe: concurrent calls for different DESTs are independent.
#ifndef STOKER_SERVER_STORAGE_TRANSFER_H_
#define STOKER_SERVER_STORAGE_TRANSFER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/manifest.h"
#include "server/dataset/part_files.h"
#include "server/storage/store.h"

namespace stoker::storage {

inline constexpr char kPullStateDir[] = ".stoker-pull";

struct TransferProgress {
  uint64_t bytes_done = 0;   // Moved by this call, plus those already there.
  uint64_t bytes_total = 0;  // Of every file of the dataset.
  uint64_t files_done = 0;
  uint64_t files_total = 0;
  // Pull: bytes fetched from the source by this call, refetches included
  // (bytes_done also counts those a ranged read had already written).
  uint64_t bytes_moved = 0;
};

struct TransferOptions {
  int parallel = 8;                           // Requests in flight.
  uint64_t chunk_bytes = uint64_t{16} << 20;  // Bytes per ranged GET.
  bool force = false;                         // Push: replace another dataset.
  // Called from the transferring threads, one call at a time, as bytes
  // move. May be empty.
  std::function<void(const TransferProgress&)> progress;
  // Lines worth telling the user (resumed files, a refetch). May be empty.
  std::function<void(const std::string&)> notice;

  // The hooks below may be empty; the daemon's stager uses them.
  // Pull: called once SOURCE's manifest is read and checked, before
  // anything is fetched, with the manifest and its text.
  std::function<void(const dataset::Manifest&, const std::string&)> on_manifest;
  // Pull: called after the manifest with the bytes still to fetch (the
  // files DEST does not hold yet, less what it keeps of their part files);
  // an error stops the pull before any part file is created or changed (no
  // room on the disk, over a cache limit).
  std::function<absl::Status(uint64_t)> reserve;
  // Pull: called for each file (a shard or a record index, by name) that
  // is in DEST, checked: at the start for those an earlier, killed pull
  // published, then as each is renamed into place, from the transferring
  // threads, one call at a time.
  std::function<void(const std::string&)> on_published;
  // Pull: asked before each chunk; once true the pull stops and returns
  // Cancelled (the files published so far stay, for a later resume).
  std::function<bool()> cancelled;
  // Pull: shared with the ranged reads of a dataset served while it is
  // staged (part_files.h). Each shard's part file is opened in it when
  // created, so that records read by range are written into it; a chunk
  // is then fetched in pieces of `piece_bytes`, each claimed while in
  // flight, asking only for the ranges not present (merged where a present
  // run is shorter than `min_kept_bytes`). Closed before each file is
  // checked and published, and all when the pull returns. Null: every
  // chunk is fetched whole by one GET (`stoker pull`).
  std::shared_ptr<dataset::PartFiles> parts;
  uint64_t piece_bytes = uint64_t{512} << 10;
  uint64_t min_kept_bytes = uint64_t{32} << 10;
};

struct TransferReport {
  dataset::Manifest manifest;
  uint64_t bytes_moved = 0;  // By this call.
  uint64_t files_moved = 0;
  uint64_t files_reused = 0;  // Pull: published by an earlier, killed pull.
  // Pull: bytes of part files that an earlier, killed pull had written
  // (and journaled), kept rather than fetched again.
  uint64_t bytes_resumed = 0;
  double seconds = 0;
};

absl::StatusOr<TransferReport> Pull(Store& source, const std::string& dest,
                                    const TransferOptions& options);

// Whether `status` is Pull's refusal because another process holds the
// lock on DEST (its message names that process's pid).
bool IsDestLocked(const absl::Status& status);

absl::StatusOr<TransferReport> Push(const std::string& dir, Store& dest,
                                    const TransferOptions& options);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_TRANSFER_H_
