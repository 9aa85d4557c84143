// `--from webdataset`: tar shards (a file, a folder of .tar files, or a
// glob) whose members are grouped into samples as WebDataset does: a
// member "dir/n0001.seg.png" has key "dir/n0001" (its basename up to the
// first dot, within its directory) and extension "seg.png"; consecutive
// members with one key are one sample. The extension names the field:
//
//   jpg jpeg png webp  -> image (image)     cls -> label (int64, as text)
//   json txt           -> json, txt (str)   npy -> npy (ndarray)
//
// `--field NAME=EXT:KIND` adds the members of extension EXT as field NAME,
// or renames a default field (`--field class=cls:int64`); `--field
// label:float32` retypes one. A .npy field without a flag takes the dtype
// and trailing shape of the first sample's array; an extension ending in
// .npy is parsed as one. A sample that lacks a field's member, or has one twice,
// is a bad sample (`--on-error`).

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/dataset/importers/file_range.h"
#include "server/dataset/importers/importers.h"
#include "server/dataset/importers/npy.h"
#include "server/dataset/importers/tar_reader.h"
#include "server/dataset/skip_summary.h"

namespace stoker::dataset {
namespace {

const std::vector<std::string>& ImageExtensions() {
  static const auto* kExts =
      new std::vector<std::string>{"jpg", "jpeg", "png", "webp"};
  return *kExts;
}

struct Sample {
  size_t file = 0;
  std::map<std::string, TarMember> members;  // By extension.
};

// Splits a member name into key and extension, as WebDataset's
// base_plus_ext; false for a name without an extension.
bool SplitKey(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  *key = name.substr(0, dot);
  *ext = name.substr(dot + 1);
  return !ext->empty();
}

class WebDatasetImporter final : public Importer {
 public:
  WebDatasetImporter(std::string src, std::vector<FieldFlag> fields)
      : src_(std::move(src)), flags_(std::move(fields)) {}

  std::string source() const override { return src_; }

  absl::StatusOr<ImportListing> List() override {
    absl::StatusOr<std::vector<std::string>> files =
        ExpandShardFiles(src_, ".tar");
    if (!files.ok()) return files.status();
    files_ = *std::move(files);
    ImportListing out;
    std::set<std::string> extensions;
    for (size_t f = 0; f < files_.size(); ++f) {
      const std::string& path = files_[f];
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(path, ec);
      if (ec) return absl::NotFoundError(absl::StrCat("cannot stat ", path));
      absl::StatusOr<TarListing> tar =
          ListShardFile<TarListing>(path, size, ListTar);
      if (!tar.ok()) {
        // One broken shard: its earlier samples are lost too, since its
        // headers cannot be trusted; the others still pack.
        out.rejected.push_back({path, std::string(tar.status().message())});
        continue;
      }
      for (const std::string& other : tar->others) {
        out.rejected.push_back(
            {absl::StrCat(path, ":", other), "not a regular file"});
      }
      std::string last_key;
      for (TarMember& m : tar->files) {
        std::string key, ext;
        if (!SplitKey(m.name, &key, &ext)) {
          out.rejected.push_back({absl::StrCat(path, ":", m.name),
                                  "no extension, so no field"});
          continue;
        }
        if (samples_.empty() || key != last_key ||
            samples_.back().file != f) {
          samples_.push_back({f, {}});
          out.samples.push_back(absl::StrCat(path, ":", key));
          last_key = key;
        }
        if (!samples_.back().members.emplace(ext, std::move(m)).second) {
          duplicates_.insert(samples_.size() - 1);
        }
        extensions.insert(ext);
      }
    }
    if (samples_.empty() && !out.rejected.empty()) {
      // Say why nothing was found, not that it holds no known extension.
      return absl::InvalidArgumentError(absl::StrCat(
          "no samples in ", src_, ": every shard or member was rejected, "
          "for these reasons:\n", SummarizeSkipped(out.rejected)));
    }
    absl::Status s = MakeColumns(extensions);
    if (!s.ok()) return s;
    for (const Column& c : columns_) out.schema.push_back(c.spec);
    return out;
  }

  absl::Status Read(uint64_t i,
                    std::vector<std::string>* values) const override {
    const Sample& sample = samples_[i];
    if (duplicates_.count(i) > 0) {
      return absl::DataLossError("two members with one key and extension");
    }
    values->resize(columns_.size());
    std::string bytes;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const Column& col = columns_[c];
      const TarMember* member = nullptr;
      for (const std::string& ext : col.sources) {
        auto it = sample.members.find(ext);
        if (it != sample.members.end()) {
          member = &it->second;
          break;
        }
      }
      if (member == nullptr) {
        return absl::DataLossError(
            absl::StrCat("no member for field '", col.spec.name, "' (.",
                         absl::StrJoin(col.sources, ", ."), ")"));
      }
      if (absl::Status s = ReadRange(files_[sample.file], member->offset,
                                     member->size, &bytes);
          !s.ok()) {
        return s;
      }
      absl::StatusOr<std::string> value = Convert(col, bytes);
      if (!value.ok()) {
        return absl::Status(value.status().code(),
                            absl::StrCat(member->name, ": ",
                                         value.status().message()));
      }
      (*values)[c] = *std::move(value);
    }
    return absl::OkStatus();
  }

 private:
  // A member's bytes as the field's value.
  absl::StatusOr<std::string> Convert(const Column& col,
                                      const std::string& bytes) const {
    const FieldSpec& spec = col.spec;
    if (col.sources.front() == "npy" ||
        (col.sources.front().size() > 4 &&
         col.sources.front().substr(col.sources.front().size() - 4) ==
             ".npy")) {
      absl::StatusOr<NpyArray> a = ParseNpy(bytes);
      if (!a.ok()) return a.status();
      if (a->dtype != spec.dtype) {
        return absl::DataLossError(absl::StrCat(
            "dtype ", std::string(tensor::DTypeName(a->dtype)), ", field '",
            spec.name, "' is ", std::string(tensor::DTypeName(spec.dtype))));
      }
      // The trailing dimensions must match, not only the byte count.
      const bool ragged = !spec.shape.empty() && spec.shape[0] == -1;
      std::vector<int64_t> want = spec.shape, got = a->shape;
      if (ragged && !got.empty()) want[0] = got[0];
      if (got != want) {
        return absl::DataLossError(absl::StrCat(
            "shape (", absl::StrJoin(got, ", "), "), field '", spec.name,
            "' is [", absl::StrJoin(spec.shape, ", "), "]"));
      }
      return std::string(a->data);
    }
    if (spec.kind->spatial() || spec.kind->name() == "str" ||
        spec.kind->name() == "bytes") {
      return bytes;
    }
    return spec.kind->FromText(spec, bytes);
  }

  // The schema: image, label, then json, npy and txt, as present; --field
  // flags retype, rename or add (ResolveColumns).
  absl::Status MakeColumns(const std::set<std::string>& extensions) {
    std::vector<Column> defaults;
    auto add = [&](const std::string& name, std::string_view kind,
                   std::vector<std::string> exts) -> absl::Status {
      absl::StatusOr<FieldSpec> spec = MakeFieldSpec(name, kind);
      if (!spec.ok()) return spec.status();
      defaults.push_back({*std::move(spec), std::move(exts)});
      return absl::OkStatus();
    };
    auto flagged = [&](const std::string& ext) {
      for (const FieldFlag& f : flags_) {
        if (f.source == ext) return true;
      }
      return false;
    };
    bool has_image = false;
    for (const std::string& e : ImageExtensions()) {
      has_image |= extensions.count(e) > 0;
    }
    if (has_image) {
      if (absl::Status s = add("image", "image", ImageExtensions()); !s.ok()) {
        return s;
      }
    }
    if (extensions.count("cls")) {
      if (absl::Status s = add("label", "int64", {"cls"}); !s.ok()) return s;
    }
    for (const std::string& ext : extensions) {
      if (ext == "json" || ext == "txt") {
        if (absl::Status s = add(ext, "str", {ext}); !s.ok()) return s;
      } else if (ext == "npy" && !flagged("npy")) {
        // Its dtype and shape from the first array, unless a flag says.
        absl::StatusOr<FieldSpec> spec = NpySpecFromFirst();
        if (!spec.ok()) return spec.status();
        defaults.push_back({*std::move(spec), {"npy"}});
      }
    }
    absl::StatusOr<std::vector<Column>> columns =
        ResolveColumns(std::move(defaults), flags_);
    if (!columns.ok()) return columns.status();
    columns_ = *std::move(columns);
    if (columns_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no fields in ", src_,
          ": no member has a known extension (jpg, png, cls, json, txt, npy)"
          "; name others with --field NAME=EXT:KIND"));
    }
    return absl::OkStatus();
  }

  // The ndarray spec of the first .npy member: its dtype, and its shape
  // with the first dimension free.
  absl::StatusOr<FieldSpec> NpySpecFromFirst() const {
    for (const Sample& s : samples_) {
      auto it = s.members.find("npy");
      if (it == s.members.end()) continue;
      std::string bytes;
      const std::string& path = files_[s.file];
      if (absl::Status st =
              ReadRange(path, it->second.offset, it->second.size, &bytes);
          !st.ok()) {
        return absl::Status(st.code(), absl::StrCat(path, ":", it->second.name,
                                                    ": ", st.message()));
      }
      absl::StatusOr<NpyArray> a = ParseNpy(bytes);
      if (!a.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", it->second.name, ": ",
                         a.status().message(),
                         "; declare the field with --field npy:ndarray:..."));
      }
      std::vector<int64_t> shape = a->shape;
      if (!shape.empty()) shape[0] = -1;
      return MakeArraySpec("npy", a->dtype, std::move(shape));
    }
    return absl::InternalError("no .npy member");
  }

  const std::string src_;
  const std::vector<FieldFlag> flags_;
  // Set by List.
  std::vector<std::string> files_;
  std::vector<Sample> samples_;
  std::set<uint64_t> duplicates_;
  std::vector<Column> columns_;
};

}  // namespace

std::unique_ptr<Importer> MakeWebDatasetImporter(
    std::string src, std::vector<FieldFlag> fields) {
  return std::make_unique<WebDatasetImporter>(std::move(src),
                                              std::move(fields));
}

}  // namespace stoker::dataset
