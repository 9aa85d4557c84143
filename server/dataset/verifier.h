// Verify: reads every record of a packed dataset and reports everything
// that is wrong with it, rather than stopping at the first problem as
// Dataset::Read does. Used by `stoker verify` and by tests.
//
// Thread-safe: concurrent Verify calls share nothing.
#ifndef STOKER_SERVER_DATASET_VERIFIER_H_
#define STOKER_SERVER_DATASET_VERIFIER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/field_kind.h"
#include "server/dataset/manifest.h"
#include "server/dataset/parallel.h"

namespace stoker::dataset {

struct VerifyReport {
  uint64_t records = 0;  // Records read and found good.
  uint64_t bytes = 0;    // Their value bytes.
  // One line per problem, in shard and key order, each naming the shard
  // file and, where there is one, the key: "shard-00001.lmdb, key 17:
  // checksum mismatch". Empty when the dataset is sound.
  std::vector<std::string> errors;
};

// Checks the dataset in `dir`: the manifest; each shard's digest and that
// of its record index, where the manifest records them (shard_index.h);
// each shard's file, size and record count; every key (present, in its shard's range, none extra);
// every record (checksum, framing, each value as pack checked it: its
// kind's CheckContent); and, if `validate` is given, every spatial (image)
// field, which `validate` decodes. Shards are checked
// in parallel, one thread per core. `progress` (may be empty) is called one
// call at a time. Returns an error status only if the manifest cannot be
// read; every other problem goes into the report.
absl::StatusOr<VerifyReport> Verify(
    const std::string& dir, std::function<void(const PackProgress&)> progress,
    ImageCheck validate);

// Checks one shard of `manifest` as Verify does, reading it from
// `dir`/`shard`.file (pull checks a downloaded copy under another name by
// passing a ShardInfo whose file is that name).
VerifyReport VerifyShard(const std::string& dir, const Manifest& manifest,
                         const ShardInfo& shard);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_VERIFIER_H_
