// `--from tfrecord`: files of tf.train.Example records (a file, a folder of
// them, or a glob), framed as tfrecord_format.h says, with both CRCs
// checked: a bad data CRC makes that record a bad sample, named
// "file@offset" (`--on-error` decides); a bad length CRC ends the framing
// of its file there, and the rest of the file is reported as rejected.
//
// Fields follow the ImageNet conventions: feature `image/encoded` is field
// `image`, `image/class/label` is `label` (int64, stored as written: the
// ImageNet TFRecords number classes from 1). `--field NAME=KEY:KIND` adds
// the feature KEY as field NAME (a bytes_list value for image/bytes/str,
// one int64 or float for a scalar, a whole list for an ndarray), or renames
// image or label; `--field label:float32` retypes one.

#include <filesystem>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/importers/example_proto.h"
#include "server/dataset/importers/file_range.h"
#include "server/dataset/importers/importers.h"
#include "server/dataset/importers/number_list.h"
#include "server/dataset/importers/tfrecord_format.h"

namespace stoker::dataset {
namespace {

struct Entry {
  size_t file = 0;
  TfRecordEntry record;
};

// One feature as the value of `spec`.
absl::StatusOr<std::string> FeatureValue(const FieldSpec& spec,
                                         const ExampleFeature& f) {
  using Kind = ExampleFeature::Kind;
  const std::string_view kind = spec.kind->name();
  auto one = [&](size_t n) -> absl::Status {
    if (n == 1) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(n, " values, field '", spec.name,
                                            "' (", std::string(kind),
                                            ") takes one"));
  };
  if (f.kind == Kind::kBytes) {
    if (absl::Status s = one(f.bytes.size()); !s.ok()) return s;
    if (kind == "int64" || kind == "float32" || kind == "float64") {
      return spec.kind->FromText(spec, f.bytes[0]);
    }
    return std::string(f.bytes[0]);  // image, bytes, str; ndarray raw.
  }
  if (spec.kind->spatial() || kind == "bytes" || kind == "str") {
    return absl::DataLossError(absl::StrCat(
        "a number list, field '", spec.name, "' needs a bytes_list"));
  }
  if (kind == "ndarray") {
    // Straight to the dtype: through text, a list took some 50 times its
    // size.
    if (f.kind == Kind::kFloat) return FloatsToArray(spec, f.floats);
    return Int64sToArray(spec, f.int64s);
  }
  const size_t n = f.kind == Kind::kFloat ? f.floats.size() : f.int64s.size();
  if (absl::Status s = one(n); !s.ok()) return s;
  // One number: FromText does the range check and conversion of the
  // scalar kinds. %.9g: a float32 survives the round trip exactly.
  return spec.kind->FromText(spec, f.kind == Kind::kFloat
                                       ? absl::StrFormat("%.9g", f.floats[0])
                                       : absl::StrCat(f.int64s[0]));
}

class TfRecordImporter final : public Importer {
 public:
  TfRecordImporter(std::string src, std::vector<FieldFlag> fields)
      : src_(std::move(src)), flags_(std::move(fields)) {}

  std::string source() const override { return src_; }

  absl::StatusOr<ImportListing> List() override {
    absl::StatusOr<std::vector<std::string>> files =
        ExpandShardFiles(src_, "");
    if (!files.ok()) return files.status();
    files_ = *std::move(files);
    ImportListing out;
    for (size_t f = 0; f < files_.size(); ++f) {
      const std::string& path = files_[f];
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(path, ec);
      if (ec) return absl::NotFoundError(absl::StrCat("cannot stat ", path));
      absl::StatusOr<TfRecordListing> records =
          ListShardFile<TfRecordListing>(path, size, ListTfRecords);
      if (!records.ok()) {
        return absl::Status(records.status().code(),
                            absl::StrCat(path, ": ", records.status().message()));
      }
      for (const TfRecordEntry& r : records->records) {
        entries_.push_back({f, r});
        out.samples.push_back(absl::StrCat(path, "@", r.offset));
      }
      if (records->broken) {
        out.rejected.push_back(
            {absl::StrCat(path, "@", records->broken_at), records->why});
      }
    }
    if (absl::Status s = MakeColumns(); !s.ok()) return s;
    for (const Column& c : columns_) out.schema.push_back(c.spec);
    return out;
  }

  absl::Status Read(uint64_t i,
                    std::vector<std::string>* values) const override {
    absl::StatusOr<ExampleFeatures> features;
    std::string framed;
    if (absl::Status s = ReadExample(i, &framed, &features); !s.ok()) {
      return s;
    }
    values->resize(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) {
      auto it = features->find(columns_[c].sources.front());
      if (it == features->end()) {
        return absl::DataLossError(
            absl::StrCat("no feature '", columns_[c].sources.front(), "'"));
      }
      absl::StatusOr<std::string> v = FeatureValue(columns_[c].spec,
                                                   it->second);
      if (!v.ok()) {
        return absl::Status(v.status().code(),
                            absl::StrCat("feature '", columns_[c].sources.front(), "': ",
                                         v.status().message()));
      }
      (*values)[c] = *std::move(v);
    }
    return absl::OkStatus();
  }

 private:
  // Reads record i, checks its CRCs and parses it; `framed` holds the bytes
  // the features borrow.
  absl::Status ReadExample(uint64_t i, std::string* framed,
                           absl::StatusOr<ExampleFeatures>* features) const {
    const Entry& e = entries_[i];
    if (absl::Status s = ReadRange(
            files_[e.file], e.record.offset,
            kTfRecordHeaderBytes + e.record.length + kTfRecordFooterBytes,
            framed);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<std::string_view> data =
        CheckTfRecord(*framed, e.record.offset);
    if (!data.ok()) return data.status();
    *features = ParseExample(*data);
    return features->status();
  }

  // image and label if the first good record has them, then the --field
  // features (ResolveColumns).
  absl::Status MakeColumns() {
    absl::StatusOr<ExampleFeatures> first = absl::NotFoundError("no records");
    std::string framed;
    for (uint64_t i = 0; i < entries_.size() && !first.ok(); ++i) {
      if (!ReadExample(i, &framed, &first).ok()) continue;
    }
    std::vector<Column> defaults;
    for (auto [name, kind, key] :
         {std::tuple<const char*, const char*, const char*>{
              "image", "image", "image/encoded"},
          {"label", "int64", "image/class/label"}}) {
      if (!first.ok() || first->count(key) == 0) continue;
      absl::StatusOr<FieldSpec> spec = MakeFieldSpec(name, kind);
      if (!spec.ok()) return spec.status();
      defaults.push_back({*std::move(spec), {key}});
    }
    absl::StatusOr<std::vector<Column>> columns =
        ResolveColumns(std::move(defaults), flags_);
    if (!columns.ok()) return columns.status();
    columns_ = *std::move(columns);
    if (columns_.empty() && !entries_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no fields in ", src_,
          ": no image/encoded or image/class/label feature; name features "
          "with --field NAME=KEY:KIND"));
    }
    return absl::OkStatus();
  }

  const std::string src_;
  const std::vector<FieldFlag> flags_;
  // Set by List.
  std::vector<std::string> files_;
  std::vector<Entry> entries_;
  std::vector<Column> columns_;
};

}  // namespace

std::unique_ptr<Importer> MakeTfRecordImporter(std::string src,
                                               std::vector<FieldFlag> fields) {
  return std::make_unique<TfRecordImporter>(std::move(src), std::move(fields));
}

}  // namespace stoker::dataset
