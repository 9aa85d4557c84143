// Test fixtures for the dataset layer: temporary folders, source trees and
// tiny packed datasets of real JPEGs built on the fly.
//
// Thread-safe: the functions share no state; a ScopedTempDir is
// thread-compatible.
#ifndef STOKER_TESTS_TESTING_DATASET_FIXTURE_H_
#define STOKER_TESTS_TESTING_DATASET_FIXTURE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/dataset/field_kind.h"

namespace stoker::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it
// when the object dies. Throws std::runtime_error if it cannot be made.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `bytes` to `path`, creating the folders above it.
absl::Status WriteTestFile(const std::string& path, std::string_view bytes);

// Writes an ImageFolder tree of `num_samples` small real JPEGs (40 to 120
// pixels a side, sizes and pictures drawn from `seed`) spread round-robin
// over `num_classes` folders "class_00", "class_01", ... into
// `parent_dir`/images-<seed>, packs it into `shards` shards as the dataset
// named "test", and returns its folder, `parent_dir`/dataset-<seed>. Sample
// i of the tree goes to class i % num_classes; ids follow ImageFolder order
// (all of class_00 first), so tests read labels from the records.
// REQUIRES: 1 <= num_classes <= num_samples, 1 <= shards <= num_samples.
absl::StatusOr<std::string> MakeTestDataset(const std::string& parent_dir,
                                            int num_samples, int num_classes,
                                            int shards, uint32_t seed);

// Writes a dataset named "typed" of `schema` into `dir` (created), one
// shard holding `records` (record i has id i, one value per schema field),
// with a format version 2 manifest. The values are stored as given, not
// checked: tests of the readers' checks make bad ones on purpose.
absl::Status WriteTypedDataset(
    const std::string& dir, const std::vector<dataset::FieldSpec>& schema,
    const std::vector<std::vector<std::string>>& records);

// Records of every pass-through kind, for tests of typed fields, with the
// schema WriteTypedDataset stores them under. Sample i holds
//   tokens   ndarray int32 [-1], max_length 12: (5 * i) % 13 tokens
//            1000 * i + j (samples 0, 13, 26... have none; 5, 18... 12)
//   label    int64 i
//   score    float32 i / 4
//   weight   float64 -i / 8
//   patch    ndarray uint8 [2, 3]: i + j
//   caption  str, max_length: "caption é" followed by i % 7 letters
// All values little-endian, as records store them.
struct TypedSamples {
  std::vector<dataset::FieldSpec> schema;
  std::vector<std::vector<std::string>> records;
};
TypedSamples MakeTypedSamples(int num_samples);

// The field index of `name` in TypedSamples::schema.
enum TypedField { kTokens, kLabel, kScore, kWeight, kPatch, kCaption };

// Flips one byte in the middle of record `id`'s first field inside its shard
// file, as disk corruption would, leaving the file's size and every other
// record intact. The dataset must not be open elsewhere for writing.
absl::Status CorruptRecordOnDisk(const std::string& dataset_dir, uint64_t id);

// Every field of record `id` of `ds`, each as its size, ':' and its bytes:
// what tests compare to tell that two reads gave the same record. `info`
// (may be null) receives what Dataset::Read says of the read.
absl::StatusOr<std::string> RecordFieldBytes(const dataset::Dataset& ds,
                                             uint64_t id,
                                             dataset::ReadInfo* info = nullptr);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_DATASET_FIXTURE_H_
