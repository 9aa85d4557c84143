#include "server/dataset/lmdb_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

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
