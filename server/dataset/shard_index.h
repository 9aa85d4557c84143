// Shard digests and per-shard record indexes, written by pack after the
// shards are finalised and read by verify and pull.
//
// A shard's digest is XXH3-128 of the whole shard file, written as
// "xxh3-128:" and 32 lower-case hex digits (the hash's high 64 bits first).
// XXH3-128 is already a dependency (record checksums use xxHash), runs at
// memory speed, and 128 bits make an accidental match of a damaged copy
// negligible; it is not a defence against someone who forges a shard.
//
// The record index `shard-NNNNN.idx` lists, for each record of the shard in
// id order, where its value lies in the shard file:
//
//   "STKRIDX1"                      8 bytes, magic and version
//   first_id, count                 u64 each, little-endian
//   count x (offset, length)        u64 each: the value's bytes are
//                                   file[offset, offset + length)
//   xxh3-64 of everything above     u64
//
// LMDB returns a value as a pointer into its read-only map of the file, so
// the offset is that pointer minus the map's base. A value small enough to
// share a leaf page lies inside the page's node; a larger one lies on
// overflow pages of its own, which LMDB allocates contiguously, so the value
// is still one contiguous range that starts after the first overflow page's
// 16-byte header. Either way a ranged read of (offset, length) returns the
// exact record value, checksum included (record.h), so a reader can check
// it without the rest of the shard.
//
// Thread-safe: the functions share no state.
#ifndef STOKER_SERVER_DATASET_SHARD_INDEX_H_
#define STOKER_SERVER_DATASET_SHARD_INDEX_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/manifest.h"

namespace stoker::dataset {

inline constexpr char kDigestPrefix[] = "xxh3-128:";

// Where one record's value lies in its shard file.
struct RecordRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The record index of one shard (see above).
struct ShardIndex {
  uint64_t first_id = 0;
  std::vector<RecordRange> records;  // records[i] is id first_id + i.
};

// Streaming XXH3-128 over bytes given in pieces, as "xxh3-128:HEX".
class Digester {
 public:
  Digester();
  ~Digester();
  Digester(const Digester&) = delete;
  Digester& operator=(const Digester&) = delete;

  void Update(std::string_view bytes);
  std::string Finish();

 private:
  void* state_;  // An XXH3_state_t, owned.
};

// The digest of the whole file at `path`.
absl::StatusOr<std::string> FileDigest(const std::string& path);

// The digest of `bytes`.
std::string BytesDigest(std::string_view bytes);

// The name of the record index of shard file `shard_file`:
// "shard-00003.lmdb" -> "shard-00003.idx".
std::string IndexFileName(const std::string& shard_file);

std::string SerializeShardIndex(const ShardIndex& index);

// DataLoss naming `name` if the bytes are not an index (magic, size or
// checksum wrong).
absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view bytes,
                                           std::string_view name);

// Reads the finished shard `dir`/`shard->file`, writes its record index
// beside it (durably) and fills in shard->digest, index_file, index_bytes
// and index_digest. DataLoss if a key is out of the shard's range or order.
absl::Status WriteShardIndexAndDigests(const std::string& dir,
                                       ShardInfo* shard);

// WriteShardIndexAndDigests for every shard, `threads` at a time; the first
// error (in shard order) if any fails.
absl::Status IndexShards(const std::string& dir, std::vector<ShardInfo>* shards,
                         int threads);

// Checks the digests of one shard (and of its index) that the manifest
// records; OK when it records none. DataLoss naming the file otherwise.
absl::Status CheckShardDigests(const std::string& dir, const ShardInfo& shard);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_SHARD_INDEX_H_
