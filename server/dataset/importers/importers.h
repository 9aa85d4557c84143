// The source formats `stoker pack --from KIND` reads, one file each, behind
// the Importer interface (../importer.h):
//
//   imagefolder             SRC/<class>/.../<file> (source_list.h)
//   list                    `path,label` lines; with --field, a CSV (header
//                           row) or JSONL (.jsonl) manifest of typed columns
//                           (table.cc)
//   webdataset              tar shards, members grouped by key (webdataset.cc)
//   tfrecord                tf.train.Example records (tfrecord.cc)
//   efficient-pytorch-lmdb  Lyken17/Efficient-PyTorch folder2lmdb.py output,
//                           msgpack or pickle values (efficient_lmdb.cc)
//
// Every parser here is hand-written over bytes and cannot run code: the
// pickle reader accepts only the opcodes of a (bytes, int) record.
//
// Thread-safe: the functions share no state.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_IMPORTERS_H_
#define STOKER_SERVER_DATASET_IMPORTERS_IMPORTERS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/field_kind.h"
#include "server/dataset/importer.h"

namespace stoker::dataset {

// The KIND names MakeImporter takes, in the order --help lists them.
std::vector<std::string> ImporterKinds();

// One --field flag: the field, and what it reads in the source: a CSV or
// JSONL column, a tar member extension, a TFRecord feature key.
struct FieldFlag {
  FieldSpec spec;
  std::string source;  // The flag's SOURCE, or the field's name.
};

// Parses NAME[=SOURCE]:KIND with KIND from the field-kind registry (image,
// int64, float32, float64, str, bytes), or NAME[=SOURCE]:ndarray:DTYPE:SHAPE
// with SHAPE's dimensions joined by 'x' and only the first -1 ("-1",
// "-1x4", "3x32x32"; empty for a scalar). InvalidArgument naming the flag.
absl::StatusOr<FieldFlag> ParseFieldFlag(std::string_view flag);

// A field an importer makes without a flag (WebDataset's image from .jpg,
// TFRecord's label from image/class/label), and the sources it reads, the
// first one present winning.
struct Column {
  FieldSpec spec;
  std::vector<std::string> sources;
};

// The schema of a source with named fields: each default in order, replaced
// by the flag that names it ("--field label:float32" retypes it) or reads
// one of its sources ("--field class=cls:int64" renames it); then the other
// flags in order, each reading its source. InvalidArgument for two fields
// of one name.
absl::StatusOr<std::vector<Column>> ResolveColumns(
    std::vector<Column> defaults, const std::vector<FieldFlag>& flags);

// The importer of `kind` for `src`. `fields` are the --field flags: the
// schema of a CSV/JSONL list (required there), or renames and types of the
// fields a tar shard or TFRecord names by extension or feature key.
// InvalidArgument for an unknown kind or fields the kind cannot take.
absl::StatusOr<std::unique_ptr<Importer>> MakeImporter(
    std::string_view kind, std::string src, std::vector<FieldFlag> fields);

// The importers MakeImporter returns, for tests.
std::unique_ptr<Importer> MakeTableImporter(std::string file,
                                            std::vector<FieldFlag> fields);
std::unique_ptr<Importer> MakeWebDatasetImporter(std::string src,
                                                 std::vector<FieldFlag> fields);
std::unique_ptr<Importer> MakeTfRecordImporter(std::string src,
                                               std::vector<FieldFlag> fields);
std::unique_ptr<Importer> MakeEfficientLmdbImporter(std::string src);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_IMPORTERS_H_
