// The content digest of a packed dataset: what proves that two daemons
// serve the same samples, where the manifest digest (manifest.h) proves
// only the same manifest file. A manifest copied beside other records has
// the manifest's digest and another content digest.
//
// Definition: XXH3-64 (seed 0) of every record's checksum (record.h: the
// last 8 bytes of its value, as stored), in sample id order, as 16 hex
// digits. Since every read verifies a record against its checksum, two
// datasets with one content digest deliver the same bytes for every id.
// It does not depend on how the records are split into shards.
//
// Computing it reads one page per record (where the checksum lies), not
// the records: for 1.28 M records, about as many page reads. pack stores it
// in the manifest ("content_digest"); a pack made before that has none, and
// a daemon computes it from the records when it is first asked for it.
//
// Thread-safe: the functions share no state.
#ifndef STOKER_SERVER_DATASET_CONTENT_DIGEST_H_
#define STOKER_SERVER_DATASET_CONTENT_DIGEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"

namespace stoker::dataset {

// The content digest of the records in `shards`, opened from `dir` as
// `manifest` lists them (one per entry, in order). Reads run under the map
// guard: a shard that changed under the daemon gives DataLoss naming its
// file, as does a shard whose record count or keys are not the manifest's.
absl::StatusOr<std::string> ContentDigestOf(
    absl::Span<const ReadOnlyShard> shards, const Manifest& manifest,
    const std::string& dir);

// Opens the shards of the dataset in `dir` (described by `manifest`) and
// computes their content digest.
absl::StatusOr<std::string> ComputeContentDigest(const std::string& dir,
                                                 const Manifest& manifest);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_CONTENT_DIGEST_H_
