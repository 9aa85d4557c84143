#include "server/dataset/lmdb_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {

absl::Status LmdbError(int rc, absl::string_view context) {
  const std::string msg = absl::StrCat(context, ": ", mdb_strerror(rc));
  if (rc > 0) return absl::ErrnoToStatus(rc, msg);
  switch (rc) {
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_TXN:
    case MDB_INCOMPATIBLE:
      return absl::DataLossError(msg);
    case MDB_MAP_FULL:
      return absl::ResourceExhaustedError(msg);
    case MDB_NOTFOUND:
      return absl::NotFoundError(msg);
    default:
      return absl::InternalError(msg);
  }
}

namespace {

absl::StatusOr<EnvPtr> OpenEnv(const std::string& path, unsigned flags,
                               size_t map_size) {
  MDB_env* raw = nullptr;
  if (int rc = mdb_env_create(&raw); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot create LMDB env for ", path));
  }
  EnvPtr env(raw);
  if (map_size > 0) {
    if (int rc = mdb_env_set_mapsize(env.get(), map_size); rc != 0) {
      return LmdbError(rc, absl::StrCat("cannot set map size of ", path));
    }
  }
  if (int rc = mdb_env_open(env.get(), path.c_str(), flags, 0644); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot open ", path));
  }
  return env;
}

// The start of the mapping of this process that holds `inside`, from
// /proc/self/maps; it must be `size` bytes long, LMDB's map size.
absl::StatusOr<const char*> FindMapping(const void* inside, size_t size) {
  std::ifstream maps("/proc/self/maps");
  const uintptr_t p = reinterpret_cast<uintptr_t>(inside);
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) != 2) continue;
    if (p < begin || p >= end) continue;
    if (end - begin != size) {
      return absl::InternalError(
          absl::StrCat("the mapping that holds its first record is ",
                       end - begin, " bytes, LMDB's map is ", size));
    }
    return reinterpret_cast<const char*>(begin);
  }
  return absl::InternalError("no mapping holds its first record");
}

}  // namespace

absl::StatusOr<ReadOnlyShard> OpenShardForRead(const std::string& path,
                                               uint64_t expected_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::DataLossError(
        absl::StrCat("shard file ", path, ": ", std::strerror(errno)));
  }
  if (static_cast<uint64_t>(st.st_size) != expected_bytes) {
    return absl::DataLossError(
        absl::StrCat("shard file ", path, " has ", st.st_size,
                     " bytes, the manifest says ", expected_bytes));
  }
  // No map size: a read-only env maps the size the writer recorded.
  absl::StatusOr<EnvPtr> env = OpenEnv(
      path, MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD,
      0);
  if (!env.ok()) return env.status();
  ReadOnlyShard shard;
  shard.env = *std::move(env);
  MDB_envinfo info;
  MDB_stat env_stat;
  mdb_env_info(shard.env.get(), &info);
  mdb_env_stat(shard.env.get(), &env_stat);
  // The meta pages were read by mdb_env_open, inside the file checked above.
  const uint64_t pages_bytes =
      (static_cast<uint64_t>(info.me_last_pgno) + 1) * env_stat.ms_psize;
  if (pages_bytes > expected_bytes) {
    return absl::DataLossError(
        absl::StrCat("shard file ", path, ": its meta page says ",
                     info.me_last_pgno + 1, " pages of ", env_stat.ms_psize,
                     " bytes, the file has ", expected_bytes, " bytes"));
  }
  shard.file_bytes = expected_bytes;
  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(shard.env.get(), nullptr, MDB_RDONLY, &txn);
      rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot read ", path));
  }
  TxnPtr owned(txn);
  MDB_stat stat;
  if (int rc = mdb_dbi_open(txn, nullptr, 0, &shard.dbi); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot open the database in ", path));
  }
  if (int rc = mdb_stat(txn, shard.dbi, &stat); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot stat ", path));
  }
  shard.entries = stat.ms_entries;
  // LMDB does not say where its map is (me_mapaddr is only set with
  // MDB_FIXEDMAP), so find the mapping that holds the first record.
  MDB_cursor* raw_cursor = nullptr;
  if (int rc = mdb_cursor_open(txn, shard.dbi, &raw_cursor); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot read ", path));
  }
  const CursorPtr cursor(raw_cursor);
  MDB_val k, v;
  if (int rc = mdb_cursor_get(raw_cursor, &k, &v, MDB_FIRST); rc == 0) {
    absl::StatusOr<const char*> map = FindMapping(v.mv_data, info.me_mapsize);
    if (!map.ok()) {
      return absl::Status(
          map.status().code(),
          absl::StrCat("cannot open ", path, ": ", map.status().message()));
    }
    shard.map = *map;
    absl::StatusOr<std::unique_ptr<MappedRegion>> region =
        MappedRegion::Register(shard.map, info.me_mapsize);
    if (!region.ok()) {
      return absl::Status(
          region.status().code(),
          absl::StrCat("cannot open ", path, ": ", region.status().message()));
    }
    shard.region = *std::move(region);
  } else if (rc != MDB_NOTFOUND) {
    return LmdbError(rc, absl::StrCat("cannot read ", path));
  }
  // Committing keeps the database handle open for later transactions.
  if (int rc = mdb_txn_commit(owned.release()); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot read ", path));
  }
  return shard;
}

absl::StatusOr<EnvPtr> CreateShardForWrite(const std::string& path,
                                           size_t map_size) {
  return OpenEnv(path, MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC, map_size);
}

}  // namespace stoker::dataset
