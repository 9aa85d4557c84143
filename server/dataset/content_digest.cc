#include "server/dataset/content_digest.h"

#include <xxhash.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/map_guard.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

struct StateFree {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

// One shard's scan, run under the map guard: it owns no object with a
// destructor (a fault jumps out of it) and leaves its transaction and
// cursor for the caller to close.
struct Scan {
  // In.
  const ReadOnlyShard* shard = nullptr;
  XXH3_state_t* state = nullptr;
  uint64_t first_id = 0;
  // Out.
  MDB_txn* txn = nullptr;
  MDB_cursor* cursor = nullptr;
  int rc = 0;
  uint64_t records = 0;
  bool outside = false;    // A key or value outside the file.
  bool misplaced = false;  // A key that is not the next id.
  bool short_value = false;
};

void ScanShard(void* arg) {
  Scan& s = *static_cast<Scan*>(arg);
  s.rc = mdb_txn_begin(s.shard->env.get(), nullptr, MDB_RDONLY, &s.txn);
  if (s.rc != 0) return;
  s.rc = mdb_cursor_open(s.txn, s.shard->dbi, &s.cursor);
  if (s.rc != 0) return;
  MDB_val key, value;
  for (MDB_cursor_op op = MDB_FIRST;; op = MDB_NEXT) {
    s.rc = mdb_cursor_get(s.cursor, &key, &value, op);
    if (s.rc == MDB_NOTFOUND) {
      s.rc = 0;
      return;
    }
    if (s.rc != 0) return;
    if (!s.shard->Contains(key.mv_data, key.mv_size) ||
        !s.shard->Contains(value.mv_data, value.mv_size)) {
      s.outside = true;
      return;
    }
    // Keys are 8-byte big-endian ids (record.h).
    const auto* k = static_cast<const unsigned char*>(key.mv_data);
    uint64_t id = 0;
    for (size_t i = 0; i < key.mv_size && i < 8; ++i) id = id << 8 | k[i];
    if (key.mv_size != 8 || id != s.first_id + s.records) {
      s.misplaced = true;
      return;
    }
    if (value.mv_size < 8) {
      s.short_value = true;
      return;
    }
    XXH3_64bits_update(
        s.state, static_cast<const char*>(value.mv_data) + value.mv_size - 8,
        8);
    ++s.records;
  }
}

}  // namespace

absl::StatusOr<std::string> ContentDigestOf(
    absl::Span<const ReadOnlyShard> shards, const Manifest& manifest,
    const std::string& dir) {
  std::unique_ptr<XXH3_state_t, StateFree> state(XXH3_createState());
  if (state == nullptr) return absl::ResourceExhaustedError("XXH3_createState");
  XXH3_64bits_reset(state.get());
  for (size_t i = 0; i < shards.size() && i < manifest.shards.size(); ++i) {
    const ShardInfo& info = manifest.shards[i];
    const std::string where = absl::StrCat(dir, "/", info.file);
    Scan scan;
    scan.shard = &shards[i];
    scan.state = state.get();
    scan.first_id = info.first_id;
    MapFault fault;
    const bool completed = RunGuarded(ScanShard, &scan, &fault);
    if (scan.cursor != nullptr) mdb_cursor_close(scan.cursor);
    if (scan.txn != nullptr) mdb_txn_abort(scan.txn);
    if (!completed) {
      return absl::DataLossError(absl::StrCat(
          where, ": ", FaultSignalName(fault.signal),
          " reading its records' checksums: the file changed or is damaged"));
    }
    if (scan.rc != 0) {
      return LmdbError(scan.rc, absl::StrCat("cannot read ", where));
    }
    if (scan.outside || scan.misplaced || scan.short_value) {
      return absl::DataLossError(
          absl::StrCat(where, ": record ", info.first_id + scan.records, " ",
                       scan.outside ? "lies outside the file (a damaged page)"
                       : scan.misplaced ? "is missing, or a key is out of place"
                                        : "is shorter than its checksum"));
    }
    if (scan.records != info.num_samples) {
      return absl::DataLossError(absl::StrCat(where, " holds ", scan.records,
                                              " records, the manifest says ",
                                              info.num_samples));
    }
  }
  return absl::StrFormat("%016x", XXH3_64bits_digest(state.get()));
}

absl::StatusOr<std::string> ComputeContentDigest(const std::string& dir,
                                                 const Manifest& manifest) {
  std::vector<ReadOnlyShard> shards;
  for (const ShardInfo& info : manifest.shards) {
    absl::StatusOr<ReadOnlyShard> shard =
        OpenShardForRead(absl::StrCat(dir, "/", info.file), info.bytes);
    if (!shard.ok()) return shard.status();
    shards.push_back(*std::move(shard));
  }
  return ContentDigestOf(shards, manifest, dir);
}

}  // namespace stoker::dataset
