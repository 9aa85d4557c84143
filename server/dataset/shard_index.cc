#include "server/dataset/shard_index.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/file_util.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/parallel.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

constexpr char kIndexMagic[] = "STKRIDX1";
constexpr size_t kMagicBytes = 8;
constexpr size_t kHeaderBytes = kMagicBytes + 16;
constexpr size_t kEntryBytes = 16;

// Integers are little-endian whatever the host's order.
void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetU64(std::string_view bytes, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  }
  return v;
}

XXH3_state_t* State(void* p) { return static_cast<XXH3_state_t*>(p); }

}  // namespace

Digester::Digester() : state_(XXH3_createState()) {
  XXH3_128bits_reset(State(state_));
}

Digester::~Digester() { XXH3_freeState(State(state_)); }

void Digester::Update(std::string_view bytes) {
  XXH3_128bits_update(State(state_), bytes.data(), bytes.size());
}

std::string Digester::Finish() {
  const XXH128_hash_t h = XXH3_128bits_digest(State(state_));
  return absl::StrFormat("%s%016x%016x", kDigestPrefix, h.high64, h.low64);
}

std::string BytesDigest(std::string_view bytes) {
  Digester d;
  d.Update(bytes);
  return d.Finish();
}

absl::StatusOr<std::string> FileDigest(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  Digester d;
  std::string buf(1 << 20, '\0');
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    d.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  return d.Finish();
}

std::string IndexFileName(const std::string& shard_file) {
  std::string base = shard_file;
  if (absl::EndsWith(base, ".lmdb")) base.resize(base.size() - 5);
  return base + ".idx";
}

std::string SerializeShardIndex(const ShardIndex& index) {
  std::string out(kIndexMagic, kMagicBytes);
  out.reserve(kHeaderBytes + index.records.size() * kEntryBytes + 8);
  PutU64(index.first_id, &out);
  PutU64(index.records.size(), &out);
  for (const RecordRange& r : index.records) {
    PutU64(r.offset, &out);
    PutU64(r.length, &out);
  }
  PutU64(XXH3_64bits(out.data(), out.size()), &out);
  return out;
}

absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view bytes,
                                           std::string_view name) {
  const absl::string_view named(name.data(), name.size());
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("record index ", named, ": ", why));
  };
  if (bytes.size() < kHeaderBytes + 8 ||
      bytes.substr(0, kMagicBytes) != std::string_view(kIndexMagic)) {
    return bad("not a record index (bad magic or too short)");
  }
  ShardIndex index;
  index.first_id = GetU64(bytes, kMagicBytes);
  const uint64_t count = GetU64(bytes, kMagicBytes + 8);
  if (count > (bytes.size() - kHeaderBytes - 8) / kEntryBytes ||
      bytes.size() != kHeaderBytes + count * kEntryBytes + 8) {
    return bad(absl::StrCat("is ", bytes.size(), " bytes, ", count,
                            " records need ",
                            kHeaderBytes + count * kEntryBytes + 8));
  }
  const size_t body = bytes.size() - 8;
  if (XXH3_64bits(bytes.data(), body) != GetU64(bytes, body)) {
    return bad("checksum mismatch");
  }
  index.records.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = kHeaderBytes + i * kEntryBytes;
    index.records[i] = {GetU64(bytes, at), GetU64(bytes, at + 8)};
  }
  return index;
}

absl::Status WriteShardIndexAndDigests(const std::string& dir,
                                       ShardInfo* shard) {
  const std::string path = absl::StrCat(dir, "/", shard->file);
  absl::StatusOr<ReadOnlyShard> env = OpenShardForRead(path, shard->bytes);
  if (!env.ok()) return env.status();
  ShardIndex index;
  index.first_id = shard->first_id;
  index.records.reserve(shard->num_samples);
  {
    MDB_txn* raw_txn = nullptr;
    if (int rc = mdb_txn_begin(env->env.get(), nullptr, MDB_RDONLY, &raw_txn);
        rc != 0) {
      return LmdbError(rc, absl::StrCat("cannot read ", path));
    }
    const TxnPtr txn(raw_txn);
    MDB_cursor* raw_cursor = nullptr;
    if (int rc = mdb_cursor_open(raw_txn, env->dbi, &raw_cursor); rc != 0) {
      return LmdbError(rc, absl::StrCat("cannot read ", path));
    }
    const CursorPtr cursor(raw_cursor);
    MDB_val k, v;
    for (int rc = mdb_cursor_get(raw_cursor, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(raw_cursor, &k, &v, MDB_NEXT)) {
      absl::StatusOr<uint64_t> id = DecodeKey(ToView(k));
      const uint64_t expected = shard->first_id + index.records.size();
      if (!id.ok() || *id != expected) {
        return absl::DataLossError(absl::StrCat(
            path, ": record ", index.records.size(), " is not key ", expected));
      }
      if (!env->Contains(v.mv_data, v.mv_size)) {
        return absl::DataLossError(
            absl::StrCat(path, ", key ", *id, ": value lies outside the file"));
      }
      index.records.push_back(
          {static_cast<uint64_t>(static_cast<const char*>(v.mv_data) -
                                 env->map),
           v.mv_size});
    }
  }
  if (index.records.size() != shard->num_samples) {
    return absl::DataLossError(
        absl::StrCat(path, ": holds ", index.records.size(),
                     " records, expected ", shard->num_samples));
  }
  absl::StatusOr<std::string> digest = FileDigest(path);
  if (!digest.ok()) return digest.status();
  const std::string bytes = SerializeShardIndex(index);
  const std::string index_file = IndexFileName(shard->file);
  const std::string index_path = absl::StrCat(dir, "/", index_file);
  if (absl::Status s = WriteFileDurably(index_path, bytes); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(index_path, ": ", s.message()));
  }
  shard->digest = *std::move(digest);
  shard->index_file = index_file;
  shard->index_bytes = bytes.size();
  shard->index_digest = BytesDigest(bytes);
  return absl::OkStatus();
}

absl::Status IndexShards(const std::string& dir, std::vector<ShardInfo>* shards,
                         int threads) {
  std::vector<absl::Status> done(shards->size());
  ParallelFor(threads, shards->size(), [&](uint64_t s) {
    done[s] = WriteShardIndexAndDigests(dir, &(*shards)[s]);
  });
  for (const absl::Status& s : done) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckShardDigests(const std::string& dir, const ShardInfo& shard) {
  const auto check = [&](const std::string& file,
                         const std::string& expected) -> absl::Status {
    if (expected.empty()) return absl::OkStatus();
    absl::StatusOr<std::string> got = FileDigest(absl::StrCat(dir, "/", file));
    if (!got.ok()) return absl::DataLossError(got.status().message());
    if (*got != expected) {
      return absl::DataLossError(absl::StrCat(
          file, ": digest is ", *got, ", the manifest says ", expected));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check(shard.file, shard.digest); !s.ok()) return s;
  return check(shard.index_file, shard.index_digest);
}

}  // namespace stoker::dataset
