// Pack: turns the samples an Importer lists (importer.h: an ImageFolder, a
// list or CSV/JSONL manifest, WebDataset tars, TFRecords, a foreign LMDB)
// into a packed dataset: LMDB shards plus a manifest (see manifest.h and
// record.h for the format) with the importer's schema; an ImageFolder or a
// `path,label` list gives `image` (kind image) and `label` (int64).
//
// It runs in two passes. "scan" reads and checks every sample on a thread
// pool (each value with its kind's CheckContent, spatial ones with
// `validate`), remembering only its size, hash, ragged lengths and image
// formats. Ids are then assigned to the good samples in listing order, so
// the result does not depend on thread timing, and split into shards of
// contiguous ids. "write" fills the shards in parallel, one LMDB
// environment per shard, appending in key order; each sample is read again
// and must not have changed since the scan. Each finished shard is then
// read once more for its digest and record index (shard_index.h).
//
// Everything is written into the sibling folder DST.tmp-<pid>, which is
// renamed to DST only once the shards and manifest are on disk, so an
// interrupted pack never leaves a dataset that looks complete; on an error
// the temporary folder is removed, and the folders of killed packs of the
// same DST are removed by the next pack (pack_dest.h).
//
// Thread-safe: concurrent Packs to different destinations are independent.
#ifndef STOKER_SERVER_DATASET_PACKER_H_
#define STOKER_SERVER_DATASET_PACKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/field_kind.h"
#include "server/dataset/importer.h"
#include "server/dataset/manifest.h"
#include "server/dataset/parallel.h"
#include "server/dataset/source_list.h"

namespace stoker::dataset {

// What to do with a source file that is unreadable, empty, or fails the
// validate check: leave it out and report it, or stop the pack.
enum class OnError { kSkip, kFail };

// With shards = 0, one shard per this many bytes of source files.
inline constexpr uint64_t kAutoShardBytes = uint64_t{256} << 20;

struct PackOptions {
  // Exactly one source: an importer, or the shorthands for the two
  // built-in ones (importer.h).
  std::shared_ptr<Importer> importer;
  std::string src;        // ImageFolder root.
  std::string list_file;  // `path,label` lines.
  std::string dst;        // Must not exist unless `force`.
  std::string name;       // The dataset's name; empty: DST's base name.
  // Number of shards; 0: one per kAutoShardBytes, at least 1. Never more
  // than the number of samples.
  int shards = 0;
  int threads = 0;  // 0: one per core.
  OnError on_error = OnError::kSkip;
  // Replace an existing dataset at DST. A DST that is not a dataset (no
  // manifest.json) is never replaced.
  bool force = false;
  // Checks the value of each spatial (image) field and names its format, which the
  // manifest counts (the image field's "formats"); empty accepts every
  // non-empty file and counts no formats.
  ImageCheck validate;
  // Called with the progress of each pass, from the packing threads, one
  // call at a time. May be empty.
  std::function<void(const PackProgress&)> progress;
  // Called with what the pack did besides packing, such as removing the
  // temporary folder a killed pack of the same DST left. May be empty.
  std::function<void(const std::string&)> notice;
};

struct PackReport {
  Manifest manifest;
  // Entries that cannot be samples, then bad files in listing order.
  std::vector<SkippedFile> skipped;
  double seconds = 0;
};

// Packs `o.importer`, `o.src` or `o.list_file` into `o.dst`. Errors:
// InvalidArgument for bad options, a malformed source listing, a bad sample
// with kFail (naming where it comes from), a class folder or dataset name that is not UTF-8, or nothing
// left to pack; AlreadyExists if DST exists without `force`;
// ResourceExhausted "no space left ... needs about N MB" for a full
// filesystem; other file-system errors naming the path.
absl::StatusOr<PackReport> Pack(const PackOptions& o);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_PACKER_H_
