// A packed dataset opened for reading: the manifest plus one read-only LMDB
// environment per shard. Every record is checked (checksum, framing, schema)
// on every read, so corruption surfaces as DataLoss naming dataset, shard
// file and key, never as a wrong sample.
//
// Thread-safe: after Open every member is constant, and each Read runs in
// its own read-only LMDB transaction. Nothing done through a Dataset can
// modify the files (see OpenShardForRead).
#ifndef STOKER_SERVER_DATASET_DATASET_H_
#define STOKER_SERVER_DATASET_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"
#include "server/dataset/record.h"

namespace stoker::dataset {

class Dataset {
 public:
  // Opens the dataset in `dir` under the name `name` (the name errors use;
  // it need not be the manifest's). NotFound if `dir` or its manifest is
  // missing, InvalidArgument if the manifest is bad, DataLoss if a shard file
  // is missing, has another size than the manifest says, or holds another
  // number of records.
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(std::string name,
                                                       std::string dir);

  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return name_; }
  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  uint64_t num_samples() const { return manifest_.num_samples; }

  // The position of `field` in the schema and in every RecordView; -1 if
  // the dataset has no such field.
  int FieldIndex(std::string_view field) const;

  // Calls `fn` with record `id`; the view is valid only during the call, and
  // its fields match the schema (so DecodeInt64 may be called on a kInt64
  // field). Returns fn's status, NotFound if id >= num_samples(), or
  // DataLoss such as "dataset 'train': shard shard-00003.lmdb, key 1234:
  // checksum mismatch".
  absl::Status Read(
      uint64_t id, absl::FunctionRef<absl::Status(const RecordView&)> fn) const;

 private:
  Dataset(std::string name, std::string dir, Manifest manifest,
          std::vector<ReadOnlyShard> shards);

  // `status` with its message prefixed by the dataset, shard and key.
  absl::Status Annotate(const absl::Status& status, size_t shard,
                        uint64_t id) const;

  // Constant after construction.
  const std::string name_;
  const std::string dir_;
  const Manifest manifest_;
  const std::vector<ReadOnlyShard> shards_;  // One per manifest_.shards entry.
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_DATASET_H_
