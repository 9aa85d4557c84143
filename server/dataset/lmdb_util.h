// Owners for LMDB handles, status conversion, and the two ways the dataset
// layer opens a shard file: read-only for serving and verifying, and
// create-and-append for packing.
//
// Thread-safe: the functions share no state. The handles follow LMDB's rules:
// an MDB_env opened here may be shared by threads, a transaction may not.
#ifndef STOKER_SERVER_DATASET_LMDB_UTIL_H_
#define STOKER_SERVER_DATASET_LMDB_UTIL_H_

#include <lmdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/dataset/map_guard.h"

namespace stoker::dataset {

struct EnvCloser {
  void operator()(MDB_env* env) const { mdb_env_close(env); }
};
using EnvPtr = std::unique_ptr<MDB_env, EnvCloser>;

// Aborts the transaction unless it was released and committed.
struct TxnAborter {
  void operator()(MDB_txn* txn) const { mdb_txn_abort(txn); }
};
using TxnPtr = std::unique_ptr<MDB_txn, TxnAborter>;

struct CursorCloser {
  void operator()(MDB_cursor* cursor) const { mdb_cursor_close(cursor); }
};
using CursorPtr = std::unique_ptr<MDB_cursor, CursorCloser>;

// `context` followed by LMDB's message. A damaged file (MDB_CORRUPTED,
// MDB_PAGE_NOTFOUND, MDB_INVALID, ...) gives DataLoss, MDB_MAP_FULL gives
// ResourceExhausted, an errno keeps its meaning, anything else is Internal.
absl::Status LmdbError(int rc, absl::string_view context);

inline std::string_view ToView(const MDB_val& v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}
inline MDB_val ToVal(std::string_view s) {
  return {s.size(), const_cast<char*>(s.data())};
}

// A shard opened for reading: the environment, its unnamed (main) database,
// the number of records in it, and its map, registered with the map guard
// (map_guard.h) so that a fault reading it can be recovered.
struct ReadOnlyShard {
  EnvPtr env;
  MDB_dbi dbi = 0;
  uint64_t entries = 0;
  const char* map = nullptr;  // LMDB's map of the file; null if no records.
  uint64_t file_bytes = 0;    // The file's size when it was opened.
  // Declared after env, so it is unregistered before the map goes.
  std::unique_ptr<MappedRegion> region;

  // Whether [data, data + size) lies inside the file as it was opened: a
  // value LMDB returns from a damaged page may point anywhere in the map.
  bool Contains(const void* data, size_t size) const {
    const char* p = static_cast<const char*>(data);
    return p >= map && size <= file_bytes &&
           static_cast<uint64_t>(p - map) <= file_bytes - size;
  }

  // Copies a value LMDB returned out of the map, for code that runs under
  // the map guard (it creates no object with a destructor). Returns 0 and a
  // malloc'ed copy in *copy (the caller frees it), ENOMEM, or EFAULT when
  // the value lies outside the file (see Contains).
  int CopyOut(const MDB_val& v, char** copy) const {
    if (!Contains(v.mv_data, v.mv_size)) return EFAULT;
    *copy = static_cast<char*>(std::malloc(v.mv_size == 0 ? 1 : v.mv_size));
    if (*copy == nullptr) return ENOMEM;
    std::memcpy(*copy, v.mv_data, v.mv_size);
    return 0;
  }
};

// Owns what ReadOnlyShard::CopyOut returned.
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using MallocPtr = std::unique_ptr<char, FreeDeleter>;

// Opens the single-file shard `path`, which the manifest says is
// `expected_bytes` long, so that nothing can change it through this handle:
// MDB_RDONLY, MDB_NOSUBDIR, MDB_NOLOCK (datasets are immutable, so no lock
// file is needed or created), MDB_NOTLS (read transactions are not tied to a
// thread) and MDB_NORDAHEAD (samples are read in random order, so kernel
// readahead would only evict useful pages). The size is checked first: LMDB
// maps the file, and a read past the end of a truncated file would be a
// SIGBUS rather than an error; so is the page count LMDB's meta page
// records. The map is registered with the map guard, for files that change
// after this check. DataLoss if the file is missing, has another size, is
// not an LMDB file, or its meta page claims more pages than it holds.
absl::StatusOr<ReadOnlyShard> OpenShardForRead(const std::string& path,
                                               uint64_t expected_bytes);

// Creates a single-file shard for one writer with room for `map_size`
// bytes: MDB_NOSUBDIR, MDB_NOLOCK (no lock file is left behind) and
// MDB_NOSYNC (the packer calls mdb_env_sync once at the end).
absl::StatusOr<EnvPtr> CreateShardForWrite(const std::string& path,
                                           size_t map_size);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_LMDB_UTIL_H_
