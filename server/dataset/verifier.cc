#include "server/dataset/verifier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"
#include "server/dataset/record.h"
#include "server/dataset/shard_index.h"

namespace stoker::dataset {
namespace {

// One cursor step, run under the map guard (map_guard.h): it moves the
// cursor and copies the key and value out of the map, so that nothing read
// later can fault. It holds no C++ object with a destructor.
struct CursorStep {
  // In.
  MDB_cursor* cursor = nullptr;
  MDB_cursor_op op = MDB_FIRST;
  const ReadOnlyShard* shard = nullptr;
  // Out.
  int rc = 0;
  bool outside = false;  // The value lies outside the file.
  char key[8] = {};
  size_t key_size = 0;
  char* value = nullptr;  // malloc'ed; the caller frees it.
  size_t value_size = 0;
};

void Step(void* arg) {
  CursorStep& c = *static_cast<CursorStep*>(arg);
  MDB_val k, v;
  c.rc = mdb_cursor_get(c.cursor, &k, &v, c.op);
  if (c.rc != 0) return;
  c.key_size = k.mv_size;
  std::memcpy(c.key, k.mv_data, std::min(k.mv_size, sizeof(c.key)));
  const int copied = c.shard->CopyOut(v, &c.value);
  c.outside = copied == EFAULT;
  if (copied != 0) {
    if (!c.outside) c.rc = copied;
    return;
  }
  c.value_size = v.mv_size;
}

// Checks the shards of one manifest, collecting problems per shard.
class ShardChecker {
 public:
  ShardChecker(const std::string& dir, const Manifest& manifest,
               const ImageCheck& validate, ProgressCounter* progress)
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
    // The digests a newer pack records; the records are checked as well,
    // to say which of them differ.
    if (absl::Status s = CheckShardDigests(dir_, info); !s.ok()) {
      r.errors.push_back(std::string(s.message()));
    }
    if (shard->entries != info.num_samples) {
      AddError(info, "",
               absl::StrCat("holds ", shard->entries,
                            " records, the manifest says ", info.num_samples),
               &r);
    }
    MDB_txn* txn = nullptr;
    MDB_cursor* cursor = nullptr;
    struct Open {
      const ReadOnlyShard* shard;
      MDB_txn** txn;
      MDB_cursor** cursor;
      int rc;
    } open{&*shard, &txn, &cursor, 0};
    MapFault fault;
    // mdb_txn_begin reads the meta pages through the map.
    const bool opened = RunGuarded(
        [](void* arg) {
          Open& o = *static_cast<Open*>(arg);
          o.rc = mdb_txn_begin(o.shard->env.get(), nullptr, MDB_RDONLY, o.txn);
          if (o.rc == 0) o.rc = mdb_cursor_open(*o.txn, o.shard->dbi, o.cursor);
        },
        &open, &fault);
    const TxnPtr owned_txn(txn);
    const CursorPtr owned_cursor(cursor);
    if (!opened) {
      AddError(info, "", FaultMessage(fault, *shard), &r);
      return r;
    }
    if (open.rc != 0) {
      AddError(info, "", LmdbError(open.rc, "cannot read").message(), &r);
      return r;
    }
    CheckRecords(info, *shard, cursor, &r);
    return r;
  }

 private:
  static void AddError(const ShardInfo& info, absl::string_view where,
                       absl::string_view msg, VerifyReport* r) {
    r->errors.push_back(absl::StrCat(info.file, where, ": ", msg));
  }

  static std::string FaultMessage(const MapFault& fault,
                                  const ReadOnlyShard& shard) {
    return absl::StrCat(
        FaultSignalName(fault.signal), " reading offset ",
        fault.address - reinterpret_cast<uintptr_t>(shard.map),
        " of the mapped file (it is ", shard.file_bytes,
        " bytes long): the file changed or an LMDB page is damaged; the "
        "rest of this shard was not checked");
  }

  // Walks the shard in key order: every id of its range once, each record
  // sound.
  void CheckRecords(const ShardInfo& info, const ReadOnlyShard& shard,
                    MDB_cursor* cursor, VerifyReport* r) const {
    const uint64_t end = info.first_id + info.num_samples;
    uint64_t next = info.first_id;  // The first id not yet seen.
    CursorStep step;
    step.cursor = cursor;
    step.shard = &shard;
    for (step.op = MDB_FIRST;; step.op = MDB_NEXT) {
      step.value = nullptr;
      MapFault fault;
      const bool completed = RunGuarded(Step, &step, &fault);
      const MallocPtr value(step.value);
      if (!completed) {
        AddError(info, "", FaultMessage(fault, shard), r);
        return;
      }
      if (step.rc != 0) break;
      if (step.outside) {
        AddError(info, "",
                 "LMDB returned a value outside the file (a damaged page); "
                 "the rest of this shard was not checked",
                 r);
        return;
      }
      progress_->Add(1, step.value_size);
      // Only 8-byte keys were copied whole; DecodeKey refuses any other.
      absl::StatusOr<uint64_t> id =
          step.key_size == sizeof(step.key)
              ? DecodeKey(std::string_view(step.key, sizeof(step.key)))
              : DecodeKey(std::string(step.key_size, '\0'));
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
      const std::string_view bytes(value.get(), step.value_size);
      if (absl::Status s = CheckRecord(bytes); !s.ok()) {
        AddError(info, where, s.message(), r);
      } else {
        ++r->records;
        r->bytes += step.value_size;
      }
    }
    if (step.rc != MDB_NOTFOUND) {
      AddError(info, "", LmdbError(step.rc, "cannot read").message(), r);
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
    if (absl::Status s = CheckRecordContent(*record, manifest_.fields);
        !s.ok()) {
      return s;
    }
    if (!validate_) return absl::OkStatus();
    for (size_t i = 0; i < manifest_.fields.size(); ++i) {
      const FieldSpec& field = manifest_.fields[i];
      if (!field.kind->spatial()) continue;
      if (absl::Status s = validate_(record->fields[i]).status(); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("field '", field.name, "': ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  const std::string& dir_;
  const Manifest& manifest_;
  const ImageCheck& validate_;
  ProgressCounter* progress_;
};

}  // namespace

absl::StatusOr<VerifyReport> Verify(
    const std::string& dir, std::function<void(const PackProgress&)> progress,
    ImageCheck validate) {
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

VerifyReport VerifyShard(const std::string& dir, const Manifest& manifest,
                         const ShardInfo& shard) {
  const std::function<void(const PackProgress&)> none;
  ProgressCounter counter(none, "verify", shard.num_samples);
  const ImageCheck no_decode;
  return ShardChecker(dir, manifest, no_decode, &counter).Check(shard);
}

}  // namespace stoker::dataset
