#include "server/config/catalog_reader.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config/config_reference.h"
#include "server/config/op_config_reader.h"
#include "server/config/value_readers.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/registry.h"

namespace stoker::config::internal {
namespace {

namespace fs = std::filesystem;

// Reads one dataset's entry and, if its directory exists, appends it.
void ReadDataset(const MapEntry& entry, const fs::path& base_dir,
                 Diagnostics& diag, std::vector<DatasetOptions>& datasets) {
  const std::string& name = entry.key;
  if (!CheckName(entry, "dataset", diag)) return;
  const std::string key = absl::StrCat("datasets.", name);
  if (!ExpectMap(entry, key, "{path: /data/train}", diag)) return;
  const std::string path_key = absl::StrCat(key, ".path");
  std::optional<std::string> path;
  bool has_path = false;
  YAML::Mark path_mark;
  for (const MapEntry& e :
       ReadMap(entry.value, absl::StrCat("dataset '", name, "'"),
               AllowedKeys("datasets.NAME"), diag)) {
    if (e.key == "path") {
      has_path = true;
      path = ReadString(e, path_key, "a directory", diag);
      path_mark = e.value_mark;
    }
  }
  if (!has_path) {
    diag.Error(
        entry.key_node.Mark(),
        absl::StrCat("dataset '", name, "' has no path; expected {path: DIR}"));
  }
  if (!path) return;

  const std::string resolved = ResolvePath(base_dir, *path);
  const std::string shown =
      resolved == *path
          ? absl::StrCat("'", resolved, "'")
          : absl::StrCat("'", *path, "' (resolved to '", resolved, "')");
  std::error_code error;
  const fs::file_status status = fs::status(resolved, error);
  if (status.type() == fs::file_type::not_found) {
    diag.Error(path_mark, absl::StrCat(path_key, ": ", shown,
                                       " does not exist; expected a dataset "
                                       "directory written by `stoker pack`"));
  } else if (error) {
    diag.Error(path_mark, absl::StrCat(path_key, ": cannot access ", shown,
                                       ": ", error.message(),
                                       "; expected a readable directory"));
  } else if (status.type() != fs::file_type::directory) {
    diag.Error(path_mark, absl::StrCat(path_key, ": ", shown,
                                       " is not a directory; expected a "
                                       "dataset directory written by "
                                       "`stoker pack`"));
  } else {
    datasets.push_back(
        DatasetOptions{name, resolved, entry.key_node.Mark().line + 1});
  }
}

}  // namespace

std::vector<DatasetOptions> ReadDatasets(const MapEntry& entry,
                                         const fs::path& base_dir,
                                         Diagnostics& diag) {
  std::vector<DatasetOptions> datasets;
  if (!ExpectMap(entry, "datasets", "{train: {path: /data/train}}", diag)) {
    return datasets;
  }
  // A daemon without datasets could serve nothing: surely a mistake.
  if (entry.value.size() == 0) {
    diag.Error(entry.value_mark,
               "datasets is empty; expected at least one, like {train: "
               "{path: /data/train}}");
    return datasets;
  }
  for (const MapEntry& e : ReadMap(entry.value, "datasets", diag)) {
    ReadDataset(e, base_dir, diag, datasets);
  }
  return datasets;
}

std::vector<PipelineOptions> ReadPipelines(const MapEntry& entry,
                                           Diagnostics& diag) {
  std::vector<PipelineOptions> pipelines;
  if (!ExpectMap(entry, "pipelines",
                 "{train: [decode_jpeg, center_crop: {size: 224}]}", diag)) {
    return pipelines;
  }
  if (entry.value.size() == 0) {
    diag.Error(entry.value_mark,
               "pipelines is empty; expected at least one, like {train: "
               "[decode_jpeg, center_crop: {size: 224}]}");
    return pipelines;
  }
  const pipeline::OpRegistry& registry = pipeline::OpRegistry::Global();
  for (const MapEntry& e : ReadMap(entry.value, "pipelines", diag)) {
    const YAML::Mark mark = e.key_node.Mark();
    if (!CheckName(e, "pipeline", diag)) continue;
    std::optional<std::vector<pipeline::OpConfig>> ops =
        ReadOpConfigs(e.value, e.value_mark, e.key, registry, diag);
    if (!ops) continue;
    // The registry checked names and types; Create checks what only the ops
    // know (values in range, ops in a workable order).
    absl::StatusOr<std::unique_ptr<pipeline::Pipeline>> created =
        pipeline::Pipeline::Create(e.key, *ops);
    if (!created.ok()) {
      // Create's messages usually name the pipeline already. One that an op
      // caused points at that op's step; the others at the pipeline.
      const absl::string_view message = created.status().message();
      const std::string named = absl::StrCat("pipeline '", e.key, "'");
      const std::optional<size_t> index =
          pipeline::FailedOpIndex(created.status());
      const YAML::Mark at = index && *index < e.value.size()
                                ? MarkOf(e.value[*index], mark)
                                : mark;
      diag.Error(at, absl::StartsWith(message, named)
                         ? std::string(message)
                         : absl::StrCat(named, ": ", message));
      continue;
    }
    pipelines.push_back(PipelineOptions{e.key, std::move(*ops), mark.line + 1});
  }
  return pipelines;
}

}  // namespace stoker::config::internal
