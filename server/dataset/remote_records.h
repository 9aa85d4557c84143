// The records of shards that are not local yet, read by byte range from the
// dataset's source while the whole-shard copy runs (serving while staging,
// docs/storage.md).
//
// Each remote shard has its record index (shard_index.h): record `id` is
// the bytes [offset, offset + length) of the shard file, checksum included.
// A record is fetched, checked against its checksum (DecodeRecord), and
// only then put in the cache: the cache never holds a half-written or
// unchecked record. A record whose check fails is fetched once more; if it
// fails again the read returns DataLoss naming the dataset, the shard, the
// key and the URL (the source's, never with a credential).
//
// The cache holds at most `cache_bytes` of record values (RemoteOptions);
// when a new record would pass the bound, the oldest ones go first. A record
// still being read by a stream is not freed under it: readers hold a
// shared_ptr to the value.
//
// Prefetch(ids) queues the records not cached and not being fetched yet:
// per shard, sorted by offset, neighbouring ranges (at most `max_gap` bytes
// apart, at most `max_request` bytes in all) become one ranged GET, and
// `parallel` fetcher threads run the GETs. A Get() of a record whose fetch
// is queued or running waits for it instead of fetching it a second time.
//
// With RemoteOptions::parts (the staging copy's part files, part_files.h),
// a record whose bytes the copy (or an earlier read) already wrote into the
// shard's part file is read from there, not from the source, and the bytes
// of every GET from the source are written into the part file, so that the
// copy does not fetch them again. A read of bytes the copy has in flight
// waits for the copy's piece only when the piece is at most a few times
// what the read would fetch itself; a record much smaller than the piece is
// fetched as well (the piece shares the link, and on a slow link it takes
// seconds to come in). A GET also takes the bytes between the record and
// the one before it in the file (the store's own, when at most `max_gap`),
// so that the records read cover the file without holes.
// A record read from the part file is checked as one from the source; if
// the check fails it is fetched from the source.
//
// Drop(shard) forgets a shard once its local copy is published: its cached
// records are freed, and its queued fetches are skipped.
//
// Thread-safe. The fetcher threads start in the constructor and stop in
// Stop() (idempotent, called by the destructor); a Get() after Stop() still
// fetches on the calling thread.
#ifndef STOKER_SERVER_DATASET_REMOTE_RECORDS_H_
#define STOKER_SERVER_DATASET_REMOTE_RECORDS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/dataset/manifest.h"
#include "server/dataset/part_files.h"
#include "server/dataset/range_source.h"
#include "server/dataset/shard_index.h"

namespace stoker::dataset {

struct RemoteOptions {
  // Bound on the record values held in memory.
  uint64_t cache_bytes = uint64_t{512} << 20;
  // Ranged GETs in flight for prefetching.
  int parallel = 32;
  // Batches of a stream's plan fetched ahead (service/plan_prefetch.h);
  // kept here, with the other settings of the reads, for the stream.
  uint32_t ahead_batches = 8;
  // Two records whose ranges are at most this far apart are fetched by one
  // GET (the bytes between are fetched and dropped).
  uint64_t max_gap = uint64_t{64} << 10;
  // A coalesced GET covers at most this many bytes (a single record larger
  // than it is still one GET).
  uint64_t max_request = uint64_t{4} << 20;
  // With `parts`: a record fetched ahead brings the aligned block of this
  // many bytes around it into the part file (fewer, larger GETs; the
  // records of the block are then read from there). 0: the record alone.
  uint64_t block_bytes = 0;
  // The part files of the copy that stages the dataset; may be null.
  std::shared_ptr<PartFiles> parts;
};

// What the source reads of one dataset came to, since it opened.
struct RemoteReadStats {
  uint64_t records = 0;     // Records read from the source by streams.
  uint64_t requests = 0;    // Ranged GETs sent (a coalesced one counts 1).
  uint64_t bytes = 0;       // Bytes those GETs returned.
  int64_t request_ns = 0;   // Time the GETs took, summed.
  uint64_t refetches = 0;   // Records fetched again after a failed check.
  uint64_t errors = 0;      // GETs that failed, and records bad twice.
  uint64_t cached_bytes = 0;  // Record values in the cache now.
  // Bytes read from the copy's part files instead of the source.
  uint64_t local_bytes = 0;
  // Reads that waited for a fetch of their record already in flight.
  uint64_t joined = 0;
};

// One record read from the source.
struct RemoteRecord {
  // The checked value; shared with the cache, which may drop it meanwhile.
  std::shared_ptr<const std::string> value;
  int64_t wait_ns = 0;  // How long the read waited for the source.
};

class RemoteRecords {
 public:
  // `indexes[i]` is shard i's record index; nullopt for a shard that is
  // local from the start. `name` is the dataset's, for messages. `manifest`
  // must outlive this object.
  RemoteRecords(std::string name, const Manifest* manifest,
                std::vector<std::optional<ShardIndex>> indexes,
                std::unique_ptr<RangeSource> source,
                const RemoteOptions& options);
  ~RemoteRecords();
  RemoteRecords(const RemoteRecords&) = delete;
  RemoteRecords& operator=(const RemoteRecords&) = delete;

  // Record `id` of shard `shard`: from the cache, from a fetch in flight,
  // or fetched now. DataLoss (see above), the source's error, or Cancelled
  // once the shard is dropped (published: read it locally).
  // REQUIRES: shard has an index; id lies in it.
  absl::StatusOr<RemoteRecord> Get(size_t shard, uint64_t id);

  // Queues fetches of the records of `ids` that are remote, not cached and
  // not in flight. Returns at once. Ids of local shards are ignored. With
  // `urgent` (the batch being built now), each record alone even with
  // `block_bytes`: a block per record would multiply what it waits for.
  void Prefetch(absl::Span<const uint64_t> ids, bool urgent = false);

  // Shard `shard` is local now: frees its records, skips its fetches.
  void Drop(size_t shard);

  RemoteReadStats stats() const;
  const RemoteOptions& options() const { return options_; }

  void Stop();

 private:
  // One ranged GET: records `ids` of one shard, in offset order, within
  // [offset, offset + length) of its file.
  struct Job {
    size_t shard = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    std::vector<uint64_t> ids;
    bool block = false;  // [offset, offset + length) is whole blocks.
  };
  // A record in the cache: its value, or the DataLoss its fetch ended with
  // (handed to the next Get once, then forgotten, so a later read tries
  // again).
  struct Entry {
    std::shared_ptr<const std::string> value;
    absl::Status error;
    uint64_t seq = 0;  // Its place in order_.
  };

  size_t ShardOf(uint64_t id) const;
  const RecordRange& RangeOf(size_t shard, uint64_t id) const;
  void FetcherLoop();
  void RunJob(const Job& job);
  // Fetches into the part file the ranges of a block job that are neither
  // there nor in flight (claimed while they are fetched).
  void FetchBlock(const Job& job);
  // Fetches one record by itself and checks it; `tries` (1 or 2) is how
  // many fetches it may take.
  // When `local`, the part file is tried first; `tries` counts the GETs.
  absl::StatusOr<std::shared_ptr<const std::string>> FetchOne(size_t shard,
                                                              uint64_t id,
                                                              int tries,
                                                              bool local);
  // GET of bytes of a shard file, counted in stats_, and written into the
  // copy's part file.
  absl::StatusOr<std::string> Fetch(size_t shard, uint64_t offset,
                                    uint64_t length);
  // Bytes of a shard file from the copy's part file, if all are there;
  // waits for a piece of the copy in flight over them only if it is at
  // most kWaitForPieceFactor times `fetch_bytes`, the bytes this read
  // would otherwise fetch.
  std::optional<std::string> Kept(size_t shard, uint64_t offset,
                                  uint64_t length, uint64_t fetch_bytes);
  static constexpr uint64_t kWaitForPieceFactor = 4;
  // Where a GET of record `id` begins (span_begins_), or its offset.
  uint64_t SpanBegin(size_t shard, uint64_t id) const;
  // Ends the fetch of `id`: caches `value` unless its shard was dropped,
  // keeps a DataLoss for the next Get when `keep_error`, and wakes the
  // waiters. Any other error is forgotten: the next Get fetches again.
  void FinishLocked(size_t shard, uint64_t id,
                    const absl::StatusOr<std::shared_ptr<const std::string>>&
                        value,
                    bool keep_error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BadRecord(size_t shard, uint64_t id,
                         const absl::Status& check) const;

  // Constant after construction.
  const std::string name_;
  const Manifest* const manifest_;
  const std::vector<std::optional<ShardIndex>> indexes_;
  const std::unique_ptr<RangeSource> source_;
  const RemoteOptions options_;
  const std::unique_ptr<std::atomic<bool>[]> dropped_;
  // With options_.parts: per shard, per record (in id order), where a GET
  // of it begins, so that the bytes between records are kept for the copy
  // too (SpanBegins in the .cc). Empty without.
  const std::vector<std::vector<uint64_t>> span_begins_;

  mutable absl::Mutex mu_;
  absl::CondVar queued_;   // A job was queued, or Stop(): for fetchers.
  absl::CondVar fetched_;  // A fetch ended, or Stop(): for Get().
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, Entry> cache_ ABSL_GUARDED_BY(mu_);
  // (id, seq) in insertion order; an entry whose seq differs is stale.
  std::deque<std::pair<uint64_t, uint64_t>> order_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Ids being fetched or queued, with the bytes a prefetch queued for them
  // (0 for a Get's own fetch); queued_bytes_ is their sum.
  absl::flat_hash_map<uint64_t, uint64_t> in_flight_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  RemoteReadStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> fetchers_;
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_REMOTE_RECORDS_H_
