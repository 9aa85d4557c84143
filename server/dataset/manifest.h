// The manifest of a packed dataset: `manifest.json` in the dataset directory.
// It names the dataset, gives its schema, its classes and its shards. Shard i
// holds the contiguous id range [first_id, first_id + num_samples); the
// ranges follow each other from 0 and add up to the dataset's num_samples.
//
//   {
//     "format_version": 2,
//     "name": "train",
//     "num_samples": 3,
//     "fields": [
//       {"name": "image", "kind": "image", "max_length": 48213,
//        "formats": {"jpeg": 2, "png": 1}},
//       {"name": "label", "kind": "int64"},
//       {"name": "boxes", "kind": "ndarray", "dtype": "float32",
//        "shape": [-1, 4], "max_length": 57}],
//     "classes": ["cat", "dog"],
//     "shards": [{"file": "shard-00000.lmdb", "first_id": 0,
//                 "num_samples": 3, "bytes": 98304,
//                 "digest": "xxh3-128:5f0c...",
//                 "index": {"file": "shard-00000.idx", "bytes": 80,
//                           "digest": "xxh3-128:9a1e..."}}],
//     "created": "2024-05-01T12:00:00Z",
//     "source": "/data/raw/train",
//     "content_digest": "5f0c2a9e1b7d3c84"
//   }
//
// A field's kind is one of FieldKindRegistry's (field_kind.h). "dtype" and
// "shape" are required for a kind that declares them (ndarray) and refused
// for the others; "max_length" (the longest value, in rows or bytes) is
// written for a field of variable length, and "formats" for an image field,
// and both may be left out. "classes", "created" and "source" may be left
// out, as may "content_digest" (content_digest.h; packs made before it
// have none); every other key is required and no other key is allowed. A
// shard's "digest" (of the whole file) and "index" (its record index and that
// file's digest; shard_index.h) may be left out: packs made before them have
// none, and are then checked record by record.
//
// Format version 1 (every dataset packed before typed fields) has fields
// {"name", "kind": "bytes"|"int64", "content_type"}; ParseManifest reads it
// into the same in-memory form, a bytes field whose content_type starts with
// "image/" as kind image. The shards of both versions are the same.
//
// Thread-safe: every function is pure (ReadManifest reads a file).
#ifndef STOKER_SERVER_DATASET_MANIFEST_H_
#define STOKER_SERVER_DATASET_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {

// The version SerializeManifest writes, and the oldest ParseManifest reads.
inline constexpr int kFormatVersion = 2;
inline constexpr int kOldestFormatVersion = 1;
inline constexpr char kManifestFile[] = "manifest.json";

struct ShardInfo {
  std::string file;  // A plain file name inside the dataset directory.
  uint64_t first_id = 0;
  uint64_t num_samples = 0;
  uint64_t bytes = 0;  // The size of the shard file.
  // Optional (shard_index.h); empty when the manifest records none.
  std::string digest{};        // "xxh3-128:HEX" of the shard file.
  std::string index_file{};    // Its record index, a plain file name.
  uint64_t index_bytes = 0;    // The index file's size.
  std::string index_digest{};  // "xxh3-128:HEX" of the index file.

  bool has_index() const { return !index_file.empty(); }
};

struct Manifest {
  // The version of the file it was read from; SerializeManifest writes
  // kFormatVersion whatever this says.
  int format_version = kFormatVersion;
  std::string name;
  uint64_t num_samples = 0;
  std::vector<FieldSpec> fields;
  std::vector<std::string> classes;  // Label i is classes[i]; may be empty.
  std::vector<ShardInfo> shards;
  std::string created;  // UTC, ISO 8601.
  std::string source;   // Where the samples came from.
  // The records' digest as pack computed it (content_digest.h); empty for
  // a pack made before pack wrote it.
  std::string content_digest;
};

// Parses and checks a manifest. Every error is InvalidArgument and names
// `path_for_errors` and the key, e.g.
// "manifest /d/manifest.json: shards[1].first_id: is 10, expected 8 (shard
// ranges must be contiguous)".
absl::StatusOr<Manifest> ParseManifest(std::string_view json,
                                       std::string_view path_for_errors);

// Pretty-printed JSON of format version kFormatVersion that ParseManifest
// accepts. Never throws: a string that is not UTF-8 has its bad bytes
// replaced by U+FFFD.
std::string SerializeManifest(const Manifest& m);

// Which dataset this is, as 16 hex digits: xxh3-64 of SerializeManifest(m),
// so it covers the name, counts, fields, classes, every shard's size and key
// range, and the creation time. Two packs differ unless they are one.
std::string ManifestDigest(const Manifest& m);

// Reads and parses `dir`/manifest.json. NotFound if it does not exist.
absl::StatusOr<Manifest> ReadManifest(const std::string& dir);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_MANIFEST_H_
