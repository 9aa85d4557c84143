#include "server/dataset/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "server/dataset/content_digest.h"

namespace stoker::dataset {
namespace {

constexpr char kShardDamageUrl[] = "type.stoker.dev/shard-damage";
constexpr char kSourceFailureUrl[] = "type.stoker.dev/source-failure";

absl::Status Prefix(const absl::Status& s, absl::string_view prefix) {
  absl::Status out(s.code(), absl::StrCat(prefix, s.message()));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

// The part of a read that touches the map, run under the map guard. It
// holds no C++ object with a destructor: a fault jumps out of it, and the
// caller frees what it left in here.
struct MappedGet {
  // In.
  const ReadOnlyShard* shard = nullptr;
  MDB_val key{};
  // Out. The copy is malloc'ed, so that it has no destructor to skip.
  MDB_txn* txn = nullptr;
  int rc = 0;
  bool outside = false;  // The value LMDB returned lies outside the file.
  char* copy = nullptr;
  size_t size = 0;
};

void GetAndCopy(void* arg) {
  MappedGet& g = *static_cast<MappedGet*>(arg);
  g.rc = mdb_txn_begin(g.shard->env.get(), nullptr, MDB_RDONLY, &g.txn);
  if (g.rc != 0) return;
  MDB_val v;
  g.rc = mdb_get(g.txn, g.shard->dbi, &g.key, &v);
  if (g.rc != 0) return;
  const int copied = g.shard->CopyOut(v, &g.copy);
  g.outside = copied == EFAULT;
  if (copied != 0) {
    if (!g.outside) g.rc = copied;
    return;
  }
  g.size = v.mv_size;
}

// "SIGBUS at offset 1234 of the mapped file, beyond its end (it has 512
// bytes now, the manifest says 8192)" for a fault reading `path`.
std::string DescribeFault(const MapFault& fault, const ReadOnlyShard& shard,
                          const std::string& path) {
  const uintptr_t offset =
      fault.address - reinterpret_cast<uintptr_t>(shard.map);
  std::string now;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    now = absl::StrCat("it cannot be read now: ", std::strerror(errno));
  } else {
    now = absl::StrCat("it has ", st.st_size, " bytes now, the manifest says ",
                       shard.file_bytes);
  }
  return absl::StrCat(FaultSignalName(fault.signal), " reading offset ", offset,
                      " of the mapped shard file (", now,
                      "): the file changed or is damaged");
}

}  // namespace

absl::Status MarkShardDamage(absl::Status status) {
  status.SetPayload(kShardDamageUrl, absl::Cord("1"));
  return status;
}

bool IsShardDamage(const absl::Status& status) {
  return status.GetPayload(kShardDamageUrl).has_value();
}

absl::Status MarkSourceFailure(absl::Status status) {
  status.SetPayload(kSourceFailureUrl, absl::Cord("1"));
  return status;
}

bool IsSourceFailure(const absl::Status& status) {
  return status.GetPayload(kSourceFailureUrl).has_value();
}

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
      shards_(std::move(shards)),
      local_(new std::atomic<bool>[shards_.size()]),
      damaged_(new std::atomic<bool>[shards_.size()]),
      damage_(shards_.size()) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    damaged_[i] = false;
    local_[i] = true;
  }
}

Dataset::~Dataset() {
  // The fetchers read manifest_; stop them first.
  if (remote_ != nullptr) remote_->Stop();
}

absl::StatusOr<std::string> Dataset::ContentDigest() const {
  if (staging()) {
    // Not kept: it can be computed once every shard is local.
    return absl::UnavailableError(absl::StrCat(
        "dataset '", name_, "': its content digest is computed from the "
        "local copy, which is not complete yet"));
  }
  absl::MutexLock lock(&digest_mu_);
  if (digest_.has_value()) return *digest_;
  absl::StatusOr<std::string> digest =
      ContentDigestOf(shards_, manifest_, dir_);
  if (digest.ok() && !manifest_.content_digest.empty() &&
      *digest != manifest_.content_digest) {
    digest = absl::DataLossError(
        absl::StrCat("dataset '", name_, "': its records have content digest ",
                     *digest, ", its manifest says ", manifest_.content_digest,
                     ": they are not the records it was packed with"));
  } else if (!digest.ok()) {
    digest = Prefix(digest.status(), absl::StrCat("dataset '", name_, "': "));
  }
  digest_ = digest;
  return digest;
}

int Dataset::FieldIndex(std::string_view field) const {
  for (size_t i = 0; i < manifest_.fields.size(); ++i) {
    if (manifest_.fields[i].name == field) return static_cast<int>(i);
  }
  return -1;
}

absl::Status Dataset::Read(
    uint64_t id, absl::FunctionRef<absl::Status(const RecordView&)> fn,
    ReadInfo* info) const {
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
  if (damaged_[shard].load(std::memory_order_acquire)) {
    absl::MutexLock lock(&damage_mu_);
    return MarkShardDamage(
        Annotate(absl::DataLossError(absl::StrCat(
                     "the shard was found damaged (", damage_[shard], ")")),
                 shard, id));
  }
  if (!local_[shard].load(std::memory_order_acquire)) {
    return ReadRemote(shard, id, fn, info);
  }
  const ReadOnlyShard& s = shards_[shard];
  const std::string key = EncodeKey(id);
  MappedGet get;
  get.shard = &s;
  get.key = ToVal(key);
  MapFault fault;
  const bool completed = RunGuarded(GetAndCopy, &get, &fault);
  // The copy holds the record now; the map is no longer read.
  const MallocPtr copy(get.copy);
  if (get.txn != nullptr) mdb_txn_abort(get.txn);
  if (!completed) {
    const std::string path =
        absl::StrCat(dir_, "/", manifest_.shards[shard].file);
    return Damaged(shard, id,
                   absl::DataLossError(DescribeFault(fault, s, path)));
  }
  if (get.outside) {
    return Damaged(
        shard, id,
        absl::DataLossError("LMDB returned a value outside the shard file (a "
                            "damaged page)"));
  }
  if (get.rc == MDB_NOTFOUND) {
    return Annotate(absl::DataLossError("missing"), shard, id);
  }
  if (get.rc != 0) {
    absl::Status error = LmdbError(get.rc, "cannot read");
    // LMDB found its own structure broken: the shard, not the record.
    return get.rc == MDB_CORRUPTED || get.rc == MDB_PAGE_NOTFOUND
               ? Damaged(shard, id, std::move(error))
               : Annotate(error, shard, id);
  }
  return Deliver(std::string_view(copy.get(), get.size), shard, id, fn);
}

absl::Status Dataset::Deliver(
    std::string_view value, size_t shard, uint64_t id,
    absl::FunctionRef<absl::Status(const RecordView&)> fn) const {
  absl::StatusOr<RecordView> record = DecodeRecord(value);
  if (!record.ok()) return Annotate(record.status(), shard, id);
  if (absl::Status st = CheckRecordSchema(*record, manifest_.fields);
      !st.ok()) {
    return Annotate(st, shard, id);
  }
  // What fn finds (a record that does not decode) is named the same way.
  if (absl::Status st = fn(*record); !st.ok()) return Annotate(st, shard, id);
  return absl::OkStatus();
}

absl::Status Dataset::Damaged(size_t shard, uint64_t id,
                              const absl::Status& status) const {
  {
    absl::MutexLock lock(&damage_mu_);
    if (!damaged_[shard].load(std::memory_order_relaxed)) {
      damage_[shard] = absl::StrCat("key ", id, ": ", status.message());
      damaged_[shard].store(true, std::memory_order_release);
      any_damage_.store(true, std::memory_order_relaxed);
    }
  }
  return MarkShardDamage(Annotate(status, shard, id));
}

std::vector<ShardDamage> Dataset::Damage() const {
  std::vector<ShardDamage> out;
  if (!any_damage_.load(std::memory_order_relaxed)) return out;
  absl::MutexLock lock(&damage_mu_);
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (damaged_[i].load(std::memory_order_relaxed)) {
      out.push_back({manifest_.shards[i].file, damage_[i]});
    }
  }
  return out;
}

absl::Status Dataset::Annotate(const absl::Status& status, size_t shard,
                               uint64_t id) const {
  return Prefix(status,
                absl::StrCat("dataset '", name_, "': shard ",
                             manifest_.shards[shard].file, ", key ", id, ": "));
}

}  // namespace stoker::dataset
