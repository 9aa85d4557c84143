#include "server/dataset/verifier.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

// Checks the shards of one manifest, collecting problems per shard.
class ShardChecker {
 public:
  ShardChecker(const std::string& dir, const Manifest& manifest,
               const std::function<absl::Status(std::string_view)>& validate,
               ProgressCounter* progress)
      : dir_(dir),
        manifest_(manifest),
        validate_(validate),
        progress_(progress) {}

  VerifyReport Check(const ShardInfo& info) const {
    VerifyReport r;
    absl::StatusOr<ReadOnlyShard> shard =
        OpenShardForRead(absl::StrCat(dir_, "/", info.file), info.bytes);
    if (!shard.ok()) {
      AddError(info, "", shard.status().message(), &r);
      progress_->Add(info.num_samples, 0);
      return r;
    }
    if (shard->entries != info.num_samples) {
      AddError(info, "",
               absl::StrCat("holds ", shard->entries,
                            " records, the manifest says ", info.num_samples),
               &r);
    }
    MDB_txn* txn = nullptr;
    if (int rc = mdb_txn_begin(shard->env.get(), nullptr, MDB_RDONLY, &txn);
        rc != 0) {
      AddError(info, "", LmdbError(rc, "cannot read").message(), &r);
      return r;
    }
    const TxnPtr owned_txn(txn);
    MDB_cursor* cursor = nullptr;
    if (int rc = mdb_cursor_open(txn, shard->dbi, &cursor); rc != 0) {
      AddError(info, "", LmdbError(rc, "cannot read").message(), &r);
      return r;
    }
    const CursorPtr owned_cursor(cursor);
    CheckRecords(info, cursor, &r);
    return r;
  }

 private:
  static void AddError(const ShardInfo& info, absl::string_view where,
                       absl::string_view msg, VerifyReport* r) {
    r->errors.push_back(absl::StrCat(info.file, where, ": ", msg));
  }

  // Walks the shard in key order: every id of its range once, each record
  // sound.
  void CheckRecords(const ShardInfo& info, MDB_cursor* cursor,
                    VerifyReport* r) const {
    const uint64_t end = info.first_id + info.num_samples;
    uint64_t next = info.first_id;  // The first id not yet seen.
    MDB_val k, v;
    int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST);
    for (; rc == 0; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
      progress_->Add(1, v.mv_size);
      absl::StatusOr<uint64_t> id = DecodeKey(ToView(k));
      if (!id.ok()) {
        AddError(info, "", id.status().message(), r);
        continue;
      }
      const std::string where = absl::StrCat(", key ", *id);
      if (*id < info.first_id || *id >= end) {
        AddError(info, where,
                 absl::StrCat("outside the shard's range [", info.first_id,
                              ", ", end, ")"),
                 r);
        continue;
      }
      if (*id > next) AddError(info, Missing(next, *id), "missing", r);
      next = *id + 1;
      if (absl::Status s = CheckRecord(ToView(v)); !s.ok()) {
        AddError(info, where, s.message(), r);
      } else {
        ++r->records;
        r->bytes += v.mv_size;
      }
    }
    if (rc != MDB_NOTFOUND) {
      AddError(info, "", LmdbError(rc, "cannot read").message(), r);
    }
    if (next < end) AddError(info, Missing(next, end), "missing", r);
  }

  // ", key 5" or ", keys 5..9" for the ids [first, end).
  static std::string Missing(uint64_t first, uint64_t end) {
    return end - first == 1 ? absl::StrCat(", key ", first)
                            : absl::StrCat(", keys ", first, "..", end - 1);
  }

  absl::Status CheckRecord(std::string_view value) const {
    absl::StatusOr<RecordView> record = DecodeRecord(value);
    if (!record.ok()) return record.status();
    if (absl::Status s = CheckRecordSchema(*record, manifest_.fields);
        !s.ok()) {
      return s;
    }
    if (!validate_) return absl::OkStatus();
    for (size_t i = 0; i < manifest_.fields.size(); ++i) {
      const FieldSpec& field = manifest_.fields[i];
      if (!absl::StartsWith(field.content_type, "image/")) continue;
      if (absl::Status s = validate_(record->fields[i]); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("field '", field.name, "': ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  const std::string& dir_;
  const Manifest& manifest_;
  const std::function<absl::Status(std::string_view)>& validate_;
  ProgressCounter* progress_;
};

}  // namespace

absl::StatusOr<VerifyReport> Verify(
    const std::string& dir, std::function<void(const PackProgress&)> progress,
    std::function<absl::Status(std::string_view)> validate) {
  absl::StatusOr<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  std::vector<VerifyReport> shards(manifest->shards.size());
  {
    ProgressCounter counter(progress, "verify", manifest->num_samples);
    const ShardChecker checker(dir, *manifest, validate, &counter);
    ParallelFor(ResolveThreads(0), shards.size(), [&](uint64_t s) {
      shards[s] = checker.Check(manifest->shards[s]);
    });
  }
  VerifyReport report;
  for (VerifyReport& shard : shards) {
    report.records += shard.records;
    report.bytes += shard.bytes;
    for (std::string& e : shard.errors) report.errors.push_back(std::move(e));
  }
  return report;
}

}  // namespace stoker::dataset
