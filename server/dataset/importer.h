// The seam between the packer and a source format: an Importer lists the
// samples of a source (an ImageFolder, a list or CSV/JSONL manifest, tar
// shards, TFRecords, a foreign LMDB) and yields one sample's field values
// as record bytes. The packer (packer.h) does everything else the same way
// for every format: the scan and write passes on a thread pool, the checks
// of each value by its kind, progress, `--on-error`, the atomic output.
//
// Each format is one file in importers/ (importers/importers.h makes one by
// name); the ImageFolder and `path,label` list importer lives here, in
// source_list.cc, because Pack's `src`/`list_file` shorthands build it.
//
// A foreign format is parsed by a reader that cannot run code: no importer
// calls into an interpreter or constructs objects a file names.
#ifndef STOKER_SERVER_DATASET_IMPORTER_H_
#define STOKER_SERVER_DATASET_IMPORTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/field_kind.h"
#include "server/dataset/source_list.h"

namespace stoker::dataset {

// What Importer::List found.
struct ImportListing {
  // The fields of every sample, in record order. max_length and formats
  // are left 0 and empty: the packer fills them in from what it reads.
  std::vector<FieldSpec> schema;
  // Where each sample comes from, for messages: a path, "a.tar:n0001",
  // "train.tfrecord@1234". One per sample, in the order ids will follow.
  std::vector<std::string> samples;
  std::vector<std::string> classes;   // Label i's name; may be empty.
  std::vector<SkippedFile> rejected;  // Entries that cannot be samples.
};

// Thread-safety: List is called once, before any Read; Read is then called
// from many threads at once and must be safe for that.
class Importer {
 public:
  virtual ~Importer() = default;

  // The source as the manifest records it and messages name it.
  virtual std::string source() const = 0;

  // Lists the samples. NotFound for a missing source, InvalidArgument
  // naming file:line (or file and byte offset) for a malformed one.
  virtual absl::StatusOr<ImportListing> List() = 0;

  // Sample i's values, one per schema field, as the record stores them.
  // An error makes the sample bad (skipped or fatal, by `--on-error`); its
  // message need not name the sample, the packer adds listing.samples[i].
  // REQUIRES: List returned OK and i < listing.samples.size().
  virtual absl::Status Read(uint64_t i,
                            std::vector<std::string>* values) const = 0;
};

// ImageFolder (root) or `path,label` list file (source_list.h) as samples
// {image: the file's bytes, label: int64}.
std::unique_ptr<Importer> MakeImageFolderImporter(std::string root);
std::unique_ptr<Importer> MakePathLabelListImporter(std::string list_file);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTER_H_
