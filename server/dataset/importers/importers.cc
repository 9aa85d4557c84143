#include "server/dataset/importers/importers.h"

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

absl::StatusOr<FieldSpec> ParseFieldFlag(std::string_view flag) {
  const std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(flag.data(), flag.size()), ':');
  const std::string where = absl::StrCat("--field '", std::string(flag), "': ");
  if (parts.size() < 2 || parts[0].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "expected NAME:KIND or NAME:ndarray:DTYPE:SHAPE"));
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
  return spec;
}

absl::StatusOr<std::unique_ptr<Importer>> MakeImporter(
    std::string_view kind, std::string src, std::vector<FieldSpec> fields) {
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
