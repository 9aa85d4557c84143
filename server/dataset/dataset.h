// A packed dataset opened for reading: the manifest plus one read-only LMDB
// environment per shard. Every record is checked (checksum, framing, schema)
// on every read, so corruption surfaces as DataLoss naming dataset, shard
// file and key, never as a wrong sample.
//
// A shard file that changes under the daemon (truncated, or a damaged LMDB
// page that sends a lookup past the end of the file) would make a read of
// its map raise SIGBUS. Reads run under the map guard (map_guard.h): the
// record is looked up and copied out of the map with the guard armed, and
// checked and handed to `fn` from the copy. A fault, or damage LMDB itself
// reports (a corrupt page, a value outside the file), marks the shard
// damaged: that read and every later read of the shard return DataLoss
// carrying the shard-damage payload (IsShardDamage), and Damage() lists it.
//
// A dataset opened with OpenStaging is served while its copy runs: a shard
// whose file is not in `dir` yet is read record by record from the source
// (remote_records.h), and PublishShard switches it to the local file once
// the copy has published it. A local shard reads as in a dataset opened
// with Open: the only cost of staging on that path is one atomic load.
//
// Thread-safe: after Open the members are constant except the damage
// records and, while staging, which shards are local, which are atomic or
// guarded; each Read runs in its own read-only LMDB transaction. Nothing
// done through a Dataset can modify the files (see OpenShardForRead).
#ifndef STOKER_SERVER_DATASET_DATASET_H_
#define STOKER_SERVER_DATASET_DATASET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"
#include "server/dataset/range_source.h"
#include "server/dataset/record.h"
#include "server/dataset/remote_records.h"

namespace stoker::dataset {

// A status that says a whole shard is damaged (the file changed under the
// daemon, or its LMDB structure is broken), rather than one record: such a
// DataLoss ends a stream whatever on_corrupt says, since no read of the
// shard can be trusted any more.
absl::Status MarkShardDamage(absl::Status status);
bool IsShardDamage(const absl::Status& status);

// A status that says a record of a shard not local yet could not be read
// from the dataset's source (it is down, refuses, or cut the connection),
// not that the record is bad: such an error ends a stream whatever
// on_corrupt says, since skipping would lose a sound sample. Its code is
// the source's (Unavailable, PermissionDenied, NotFound, ...).
absl::Status MarkSourceFailure(absl::Status status);
bool IsSourceFailure(const absl::Status& status);

// A shard found damaged while serving.
struct ShardDamage {
  std::string file;    // The shard file's name in the dataset directory.
  std::string reason;  // The first error that marked it.
};

// How one Read got its record, for the caller's counts.
struct ReadInfo {
  bool from_source = false;  // Read from the source, not the local copy.
  uint64_t bytes = 0;        // The record's size, when from_source.
  int64_t wait_ns = 0;       // Time spent waiting for the source.
};

class Dataset {
 public:
  // Opens the dataset in `dir` under the name `name` (the name errors use;
  // it need not be the manifest's). NotFound if `dir` or its manifest is
  // missing, InvalidArgument if the manifest is bad, DataLoss if a shard file
  // is missing, has another size than the manifest says, or holds another
  // number of records.
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(std::string name,
                                                       std::string dir);

  // Opens the dataset `manifest` (read from `source`) for serving while it
  // is copied into `dir`. The shards whose files are in `dir` are local
  // (REQUIRES: put there by a copy of this manifest, which publishes a file
  // only once it is checked); the others are read from `source` by the
  // ranges of their record indexes, which are read from `dir` when there,
  // else from `source`, and checked against the manifest's digests.
  // FailedPrecondition when a shard that is not local has no record index
  // (a pack made without them is served only once its copy is complete);
  // DataLoss when an index does not match its manifest entry; the source's
  // error when it cannot be read.
  static absl::StatusOr<std::unique_ptr<Dataset>> OpenStaging(
      std::string name, std::string dir, Manifest manifest,
      std::unique_ptr<RangeSource> source, const RemoteOptions& options);

  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return name_; }
  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  uint64_t num_samples() const { return manifest_.num_samples; }

  // The position of `field` in the schema and in every RecordView; -1 if
  // the dataset has no such field.
  int FieldIndex(std::string_view field) const;

  // Calls `fn` with record `id`; the view is valid only during the call, and
  // its fields match the schema (so DecodeInt64 may be called on a kInt64
  // field). Returns NotFound if id >= num_samples(), DataLoss such as
  // "dataset 'train': shard shard-00003.lmdb, key 1234: checksum mismatch",
  // or fn's error named the same way (the key is the sample id).
  // The record handed to fn is a private copy, never the map.
  // A record of a shard that is not local yet is read from the source
  // (see OpenStaging): then `info`, when given, says so.
  absl::Status Read(uint64_t id,
                    absl::FunctionRef<absl::Status(const RecordView&)> fn,
                    ReadInfo* info = nullptr) const;

  // Staging: the shard file `file` (a name in the manifest) was published
  // in dir(): reads of its records switch to it. OK and nothing done for a
  // name that is not a shard (a record index) or a shard already local;
  // DataLoss as Open says when the file is not the shard.
  absl::Status PublishShard(const std::string& file);

  // True while some shard is not local.
  bool staging() const {
    return remote_shards_.load(std::memory_order_acquire) > 0;
  }

  // Staging: starts fetching the records `ids` that are not local, cached
  // or being fetched (RemoteRecords::Prefetch). Returns at once; does
  // nothing once every shard is local. `urgent`: RemoteRecords::Prefetch.
  void Prefetch(absl::Span<const uint64_t> ids, bool urgent = false) const;
  // Batches of a stream's plan to fetch ahead while staging
  // (RemoteOptions::ahead_batches); 0 without a source.
  uint32_t prefetch_batches() const;

  // Whether it was opened with shards to read from the source.
  bool has_source() const { return remote_ != nullptr; }
  // What reads from the source came to; zeros without one.
  RemoteReadStats remote_stats() const;

  // The content digest of the records (content_digest.h), computed from
  // them on the first call (one page read per record) and kept. DataLoss
  // when the manifest stores another one: the records are not those the
  // dataset was packed with.
  absl::StatusOr<std::string> ContentDigest() const;

  // The shards found damaged so far, in shard order; empty while healthy.
  std::vector<ShardDamage> Damage() const;
  bool healthy() const { return !any_damage_.load(std::memory_order_relaxed); }

 private:
  Dataset(std::string name, std::string dir, Manifest manifest,
          std::vector<ReadOnlyShard> shards);

  // `status` with its message prefixed by the dataset, shard and key.
  absl::Status Annotate(const absl::Status& status, size_t shard,
                        uint64_t id) const;

  // Records `status`, met reading key `id`, as shard `shard`'s damage
  // unless it has some, and returns it annotated and marked with the
  // shard-damage payload.
  absl::Status Damaged(size_t shard, uint64_t id,
                       const absl::Status& status) const;

  // Constant after construction.
  const std::string name_;
  const std::string dir_;
  const Manifest manifest_;
  // One per manifest_.shards entry. Shard i is set once, by the constructor
  // or by PublishShard under publish_mu_, before local_[i] is set; it is
  // read only after local_[i] is seen set.
  std::vector<ReadOnlyShard> shards_;
  const std::unique_ptr<std::atomic<bool>[]> local_;
  std::atomic<size_t> remote_shards_{0};  // Shards with local_ unset.
  // Reads the shards not local yet; null for a dataset opened with Open.
  std::unique_ptr<RemoteRecords> remote_;
  absl::Mutex publish_mu_;

  // Damage found while serving. A shard's flag is set once, after its
  // reason is stored; a read that sees it set returns the reason.
  const std::unique_ptr<std::atomic<bool>[]> damaged_;
  mutable std::atomic<bool> any_damage_{false};
  // Reads record `id` of shard `shard` (not local) from the source.
  absl::Status ReadRemote(size_t shard, uint64_t id,
                          absl::FunctionRef<absl::Status(const RecordView&)> fn,
                          ReadInfo* info) const;
  // Checks `value`, record `id` of `shard`, and hands it to fn.
  absl::Status Deliver(std::string_view value, size_t shard, uint64_t id,
                       absl::FunctionRef<absl::Status(const RecordView&)> fn)
      const;

  // ContentDigest(), once computed.
  mutable absl::Mutex digest_mu_;
  mutable std::optional<absl::StatusOr<std::string>> digest_
      ABSL_GUARDED_BY(digest_mu_);

  mutable absl::Mutex damage_mu_;
  mutable std::vector<std::string> damage_ ABSL_GUARDED_BY(damage_mu_);
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_DATASET_H_
