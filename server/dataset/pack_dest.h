// Housekeeping around a pack's destination DST: the checks before a pack
// starts, the temporary folder DST.tmp-<pid> a pack writes into, the removal
// of those that killed packs left behind, what the destination's filesystem
// has room for, and the manifest written last and the rename that publishes
// the dataset.
//
// A pack writes a marker file into its temporary folder first and holds an
// flock on the folder for as long as it runs. A later pack of the same DST
// removes a DST.tmp-<pid> only if it holds the marker (so a user's own
// folder of that name is never touched), no process with that pid is alive
// and the lock is free (so it never removes the folder of a pack that is
// still running, not one in another PID namespace, nor one whose pid was
// reused).
//
// Thread-safe: the functions share no state.
#ifndef STOKER_SERVER_DATASET_PACK_DEST_H_
#define STOKER_SERVER_DATASET_PACK_DEST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/manifest.h"

namespace stoker::dataset {

// The temporary folder of one pack, created empty and locked; removed
// with everything in it when destroyed, unless Keep() was called (after it
// was renamed to DST).
class PackTempDir {
 public:
  // Creates `dst`.tmp-<our pid> with its marker, replacing a pack's folder
  // of that name; FailedPrecondition if a folder of that name is not a
  // pack's.
  static absl::StatusOr<std::unique_ptr<PackTempDir>> Create(
      const std::string& dst);
  ~PackTempDir();

  PackTempDir(const PackTempDir&) = delete;
  PackTempDir& operator=(const PackTempDir&) = delete;

  const std::string& path() const { return path_; }
  // Removes the marker, so that the folder, once renamed to DST, holds
  // the dataset alone.
  absl::Status RemoveMarker();
  void Keep() { kept_ = true; }

 private:
  PackTempDir(std::string path, int lock_fd)
      : path_(std::move(path)), lock_fd_(lock_fd) {}

  const std::string path_;
  const int lock_fd_;  // Holds the flock; closed in the destructor.
  bool kept_ = false;
};

// The file that marks a folder as a pack's temporary folder.
inline constexpr char kPackTempMarker[] = ".stoker-pack-temp";

// NotFound naming DST's parent folder when it does not exist (a pack
// creates DST, not the folders above it); FailedPrecondition when it is
// not a folder.
absl::Status CheckDestParent(const std::string& dst);

// Removes every `dst`.tmp-<pid> whose pack is gone (see above) and returns
// one line per folder removed, or that could not be, e.g.
// "removed /data/train.tmp-4242, left by pack process 4242, which is gone".
std::vector<std::string> RemoveStaleTempDirs(const std::string& dst);

// Bytes the shard files of records of these value sizes take, about: LMDB
// puts a value over about 2 KiB on whole 4 KiB pages of its own, smaller
// ones into shared leaf pages; plus the meta pages of each shard and a
// little for the tree.
uint64_t EstimateShardBytes(const std::vector<uint64_t>& value_bytes,
                            uint64_t shards);

// Bytes free to an unprivileged writer on the filesystem of `dir`; 0 if it
// cannot be told.
uint64_t FreeBytes(const std::string& dir);

// "no space left on the filesystem of /data (for /data/train): the pack needs
// about 2.5 MB, 2.0 MB were free" as ResourceExhausted.
absl::Status NoSpaceError(const std::string& dst, uint64_t needed,
                          uint64_t free, absl::string_view detail);

// Checks the destination before any work: absent, or a dataset and
// `force`.
absl::Status CheckDestination(const std::string& dst, bool force);

// Whether `path` is `dir` or lies below it, after resolving both.
bool IsInside(const std::string& path, const std::string& dir);

// Writes the manifest `m` into `dir` last, durably, so that a folder with a
// manifest holds complete shards.
absl::Status WriteManifest(const std::string& dir, const Manifest& m);

// Moves the finished `tmp` to `dst`. An existing `dst` is first moved
// aside, so that at every moment `dst` is either the old or the new
// dataset, and removed once the new one is in place.
absl::Status Publish(const std::string& tmp, const std::string& dst);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_PACK_DEST_H_
