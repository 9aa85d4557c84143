#include "server/dataset/dataset.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

absl::Status Prefix(const absl::Status& s, absl::string_view prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::Open(std::string name,
                                                       std::string dir) {
  const std::string prefix = absl::StrCat("dataset '", name, "': ");
  absl::StatusOr<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return Prefix(manifest.status(), prefix);
  std::vector<ReadOnlyShard> shards;
  for (const ShardInfo& info : manifest->shards) {
    absl::StatusOr<ReadOnlyShard> shard =
        OpenShardForRead(absl::StrCat(dir, "/", info.file), info.bytes);
    if (!shard.ok()) return Prefix(shard.status(), prefix);
    if (shard->entries != info.num_samples) {
      return absl::DataLossError(
          absl::StrCat(prefix, "shard ", info.file, " holds ", shard->entries,
                       " records, the manifest says ", info.num_samples));
    }
    shards.push_back(*std::move(shard));
  }
  return std::unique_ptr<Dataset>(new Dataset(std::move(name), std::move(dir),
                                              *std::move(manifest),
                                              std::move(shards)));
}

Dataset::Dataset(std::string name, std::string dir, Manifest manifest,
                 std::vector<ReadOnlyShard> shards)
    : name_(std::move(name)),
      dir_(std::move(dir)),
      manifest_(std::move(manifest)),
      shards_(std::move(shards)) {}

int Dataset::FieldIndex(std::string_view field) const {
  for (size_t i = 0; i < manifest_.fields.size(); ++i) {
    if (manifest_.fields[i].name == field) return static_cast<int>(i);
  }
  return -1;
}

absl::Status Dataset::Read(
    uint64_t id, absl::FunctionRef<absl::Status(const RecordView&)> fn) const {
  if (id >= num_samples()) {
    return absl::NotFoundError(absl::StrCat("dataset '", name_, "': sample id ",
                                            id, " out of range [0, ",
                                            num_samples(), ")"));
  }
  // The last shard whose first id is <= id; shard ranges are contiguous.
  const auto it = std::upper_bound(
      manifest_.shards.begin(), manifest_.shards.end(), id,
      [](uint64_t v, const ShardInfo& s) { return v < s.first_id; });
  const size_t shard = (it - manifest_.shards.begin()) - 1;
  MDB_txn* raw = nullptr;
  if (int rc =
          mdb_txn_begin(shards_[shard].env.get(), nullptr, MDB_RDONLY, &raw);
      rc != 0) {
    return Annotate(LmdbError(rc, "cannot begin a read transaction"), shard,
                    id);
  }
  // The value points into the map and stays valid until the txn ends.
  const TxnPtr txn(raw);
  const std::string key = EncodeKey(id);
  MDB_val k = ToVal(key);
  MDB_val v;
  if (int rc = mdb_get(txn.get(), shards_[shard].dbi, &k, &v); rc != 0) {
    return Annotate(rc == MDB_NOTFOUND ? absl::DataLossError("missing")
                                       : LmdbError(rc, "cannot read"),
                    shard, id);
  }
  absl::StatusOr<RecordView> record = DecodeRecord(ToView(v));
  if (!record.ok()) return Annotate(record.status(), shard, id);
  if (absl::Status s = CheckRecordSchema(*record, manifest_.fields); !s.ok()) {
    return Annotate(s, shard, id);
  }
  return fn(*record);
}

absl::Status Dataset::Annotate(const absl::Status& status, size_t shard,
                               uint64_t id) const {
  return Prefix(status,
                absl::StrCat("dataset '", name_, "': shard ",
                             manifest_.shards[shard].file, ", key ", id, ": "));
}

}  // namespace stoker::dataset
