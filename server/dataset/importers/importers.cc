#include "server/dataset/importers/importers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace stoker::dataset {

std::vector<std::string> ImporterKinds() {
  return {"imagefolder", "list", "webdataset", "tfrecord",
          "efficient-pytorch-lmdb"};
}

absl::StatusOr<FieldFlag> ParseFieldFlag(std::string_view flag) {
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(flag.data(), flag.size()), ':');
  const std::string where = absl::StrCat("--field '", std::string(flag), "': ");
  std::string source;
  if (!parts.empty()) {
    const size_t eq = parts[0].find('=');
    if (eq != std::string::npos) {
      source = parts[0].substr(eq + 1);
      parts[0].resize(eq);
      if (source.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "an empty SOURCE after '='"));
      }
    }
  }
  if (parts.size() < 2 || parts[0].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "expected NAME[=SOURCE]:KIND or NAME[=SOURCE]:ndarray:DTYPE:SHAPE"));
  }
  absl::StatusOr<FieldSpec> spec;
  if (parts[1] == "ndarray") {
    if (parts.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "an ndarray is NAME:ndarray:DTYPE:SHAPE, e.g. "
                 "tokens:ndarray:int32:-1 or boxes:ndarray:float32:-1x4"));
    }
    std::optional<tensor::DType> dtype = tensor::DTypeFromName(parts[2]);
    if (!dtype.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "unknown dtype '", parts[2], "'; one of ",
                       std::string(tensor::DTypeNames())));
    }
    std::vector<int64_t> shape;
    for (absl::string_view d : absl::StrSplit(parts[3], 'x',
                                              absl::SkipEmpty())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(d, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "shape dimension '", d, "' is not a number"));
      }
      shape.push_back(v);
    }
    spec = MakeArraySpec(parts[0], *dtype, std::move(shape));
  } else {
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "only an ndarray takes a dtype and shape"));
    }
    spec = MakeFieldSpec(parts[0], parts[1]);
  }
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, spec.status().message()));
  }
  FieldFlag out{*std::move(spec), std::move(source)};
  if (out.source.empty()) out.source = out.spec.name;
  return out;
}

absl::StatusOr<std::vector<Column>> ResolveColumns(
    std::vector<Column> defaults, const std::vector<FieldFlag>& flags) {
  std::vector<bool> used(flags.size(), false);
  for (Column& d : defaults) {
    for (size_t i = 0; i < flags.size(); ++i) {
      const FieldFlag& f = flags[i];
      const bool retypes = f.source == f.spec.name && f.spec.name == d.spec.name;
      const bool renames = std::find(d.sources.begin(), d.sources.end(),
                                     f.source) != d.sources.end();
      if (used[i] || !(retypes || renames)) continue;
      d.spec = f.spec;
      // A rename reads only the source it names.
      if (!retypes) d.sources = {f.source};
      used[i] = true;
      break;
    }
  }
  std::vector<Column> out = std::move(defaults);
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!used[i]) out.push_back({flags[i].spec, {flags[i].source}});
  }
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (out[i].spec.name == out[j].spec.name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "two fields named '", out[i].spec.name,
            "' (a --field adds one unless it names a default field or reads "
            "its source)"));
      }
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Importer>> MakeImporter(
    std::string_view kind, std::string src, std::vector<FieldFlag> fields) {
  const bool typed = !fields.empty();
  if (kind == "imagefolder" || kind == "efficient-pytorch-lmdb") {
    if (typed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--from ", std::string(kind), " has a fixed schema {image, label}; --field "
                           "applies to list, webdataset and tfrecord"));
    }
    if (kind == "imagefolder") return MakeImageFolderImporter(std::move(src));
    return MakeEfficientLmdbImporter(std::move(src));
  }
  if (kind == "list") {
    if (!typed) return MakePathLabelListImporter(std::move(src));
    return MakeTableImporter(std::move(src), std::move(fields));
  }
  if (kind == "webdataset") {
    return MakeWebDatasetImporter(std::move(src), std::move(fields));
  }
  if (kind == "tfrecord") {
    return MakeTfRecordImporter(std::move(src), std::move(fields));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --from '", std::string(kind), "'; one of ",
                   absl::StrJoin(ImporterKinds(), ", ")));
}

}  // namespace stoker::dataset
