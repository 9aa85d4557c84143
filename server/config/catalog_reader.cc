#include "server/config/catalog_reader.h"

#include <algorithm>
#include <cstdint>
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
#include "server/config/presets.h"
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
  std::optional<std::string> source;
  bool has_path = false;
  YAML::Mark path_mark;
  for (const MapEntry& e :
       ReadMap(entry.value, absl::StrCat("dataset '", name, "'"),
               AllowedKeys("datasets.NAME"), diag)) {
    if (e.key == "path") {
      has_path = true;
      path = ReadString(e, path_key, "a directory", diag);
      path_mark = e.value_mark;
    } else if (e.key == "source") {
      source = ReadString(e, absl::StrCat(key, ".source"),
                          "s3://BUCKET/PREFIX, http(s)://HOST/PATH or a path",
                          diag);
      if (!source) return;
      // A local source is a folder or mount: relative to the config file.
      if (source->find("://") == std::string::npos) {
        source = ResolvePath(base_dir, *source);
      }
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
  if (source.has_value() && status.type() == fs::file_type::not_found) {
    // Staged there: stokerd creates it.
    datasets.push_back(DatasetOptions{name, resolved,
                                      entry.key_node.Mark().line + 1,
                                      *std::move(source)});
  } else if (status.type() == fs::file_type::not_found) {
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
    datasets.push_back(DatasetOptions{name, resolved,
                                      entry.key_node.Mark().line + 1,
                                      source.value_or("")});
  }
}

// One view of a pipeline with views: a list of ops, or {count, ops}.
// Appends the YAML node of each op to `nodes`.
std::optional<pipeline::ViewConfig> ReadView(
    const MapEntry& entry, absl::string_view pipeline_name,
    const pipeline::OpRegistry& registry, Diagnostics& diag,
    std::vector<YAML::Node>& nodes) {
  pipeline::ViewConfig view;
  view.name = entry.key;
  view.line = entry.key_node.Mark().line + 1;
  const std::string where = absl::StrCat(pipeline_name, "', view '", entry.key);
  YAML::Node ops = entry.value;
  YAML::Mark ops_mark = entry.value_mark;
  if (entry.value.IsMap()) {
    bool has_ops = false;
    for (const MapEntry& e :
         ReadMap(entry.value, absl::StrCat("view '", entry.key, "'"),
                 {"count", "ops"}, diag)) {
      if (e.key == "count") {
        const std::optional<uint32_t> count = ReadCount(e, "count", diag);
        if (!count) return std::nullopt;
        // Pipeline::Create says what range a count may have.
        view.count = static_cast<int>(std::min<uint32_t>(*count, INT32_MAX));
      } else {
        ops = e.value;
        ops_mark = e.value_mark;
        has_ops = true;
      }
    }
    if (!has_ops) {
      diag.Error(entry.value_mark,
                 absl::StrCat("pipeline '", where,
                              "' has no ops; expected {count: N, ops: [...]} "
                              "or a list of ops"));
      return std::nullopt;
    }
  }
  std::optional<std::vector<pipeline::OpConfig>> configs =
      ReadOpConfigs(ops, ops_mark, where, registry, diag);
  if (!configs) return std::nullopt;
  for (const YAML::Node& op : ops) nodes.push_back(op);
  view.ops = std::move(*configs);
  return view;
}

// A pipeline in the map form: {decode: [ops], views: {NAME: view}}.
// Appends the YAML node of each op to `nodes`, in Pipeline::Create's index
// order.
std::optional<pipeline::PipelineConfig> ReadViewsPipeline(
    const MapEntry& entry, const pipeline::OpRegistry& registry,
    Diagnostics& diag, std::vector<YAML::Node>& nodes) {
  pipeline::PipelineConfig config;
  const std::string section = absl::StrCat("pipeline '", entry.key, "'");
  constexpr absl::string_view kExample =
      "{global: {count: 2, ops: [{random_resized_crop: {size: 224}}]}, "
      "local: {count: 6, ops: [...]}}";
  if (!entry.value["views"] && !entry.value["decode"]) {
    // Most likely ops written as a map by mistake, not views.
    diag.Error(entry.value_mark,
               absl::StrCat(section,
                            " is a map without views; expected a list of ops "
                            "like [decode_jpeg, center_crop: {size: 224}], or "
                            "{decode: [decode_image], views: ",
                            kExample, "}"));
    return std::nullopt;
  }
  bool ok = true;
  std::optional<MapEntry> views;
  for (const MapEntry& e :
       ReadMap(entry.value, section, {"decode", "views"}, diag)) {
    if (e.key == "decode") {
      std::optional<std::vector<pipeline::OpConfig>> ops =
          ReadOpConfigs(e.value, e.value_mark, entry.key, registry, diag);
      if (!ops) {
        ok = false;
        continue;
      }
      config.ops = std::move(*ops);
      for (const YAML::Node& op : e.value) nodes.push_back(op);
    } else {
      views = e;
    }
  }
  if (!views) {
    diag.Error(entry.value_mark,
               absl::StrCat(section,
                            " has a decode list but no views; "
                            "expected views: ",
                            kExample));
    return std::nullopt;
  }
  if (!ExpectMap(*views, "views", kExample, diag)) return std::nullopt;
  if (views->value.size() == 0) {
    diag.Error(views->value_mark,
               absl::StrCat(section, ": views is empty; expected ", kExample));
    return std::nullopt;
  }
  for (const MapEntry& e :
       ReadMap(views->value, absl::StrCat(section, " views"), diag)) {
    std::optional<pipeline::ViewConfig> view =
        ReadView(e, entry.key, registry, diag, nodes);
    if (!view) {
      ok = false;
      continue;
    }
    config.views.push_back(std::move(*view));
  }
  if (!ok) return std::nullopt;
  return config;
}


// A pipeline's ops as written in `entry` (a list of ops, or the map with
// views), checked against the registry and accepted by Pipeline::Create.
std::optional<PipelineOptions> ReadPipelineBody(const MapEntry& e,
                                                Diagnostics& diag) {
  const pipeline::OpRegistry& registry = pipeline::OpRegistry::Global();
  const YAML::Mark mark = e.key_node.Mark();
  // Every op's node, in the order of Create's op indices.
  std::vector<YAML::Node> nodes;
  std::optional<pipeline::PipelineConfig> config;
  if (e.value.IsMap()) {
    config = ReadViewsPipeline(e, registry, diag, nodes);
  } else if (std::optional<std::vector<pipeline::OpConfig>> ops =
                 ReadOpConfigs(e.value, e.value_mark, e.key, registry, diag);
             ops) {
    config = pipeline::PipelineConfig{std::move(*ops), {}};
    for (const YAML::Node& op : e.value) nodes.push_back(op);
  }
  if (!config) return std::nullopt;
  // The registry checked names and types; Create checks what only the ops
  // know (values in range, ops in a workable order).
  absl::StatusOr<std::unique_ptr<pipeline::Pipeline>> created =
      pipeline::Pipeline::Create(e.key, *config);
  if (!created.ok()) {
    // Create's messages usually name the pipeline already. One that an op
    // caused points at that op's step; the others at the pipeline.
    const absl::string_view message = created.status().message();
    const std::string named = absl::StrCat("pipeline '", e.key, "'");
    const std::optional<size_t> index =
        pipeline::FailedOpIndex(created.status());
    const YAML::Mark at =
        index && *index < nodes.size() ? MarkOf(nodes[*index], mark) : mark;
    diag.Error(at, absl::StartsWith(message, named)
                       ? std::string(message)
                       : absl::StrCat(named, ": ", message));
    return std::nullopt;
  }
  return PipelineOptions{e.key, std::move(config->ops),
                         std::move(config->views), mark.line + 1};
}

// A pipeline written {preset: NAME}: the ops of the preset file NAME.yaml
// in `presets_dir` (or the folder FindPresetsDir finds). Mistakes in the
// preset file are reported at the preset's line, each with its place in
// the preset file.
std::optional<PipelineOptions> ReadPresetPipeline(
    const MapEntry& e, const std::string& presets_dir, Diagnostics& diag) {
  const std::string section = absl::StrCat("pipeline '", e.key, "'");
  std::optional<std::string> name;
  for (const MapEntry& p : ReadMap(e.value, section, {"preset"}, diag)) {
    name = ReadString(p, absl::StrCat("pipelines.", e.key, ".preset"),
                      "a preset name like imagenet_train", diag);
  }
  if (!name) return std::nullopt;
  const YAML::Mark mark = MarkOf(e.value["preset"], e.value_mark);
  absl::StatusOr<std::string> dir = FindPresetsDir(presets_dir);
  absl::StatusOr<std::string> path =
      dir.ok() ? PresetPath(*dir, *name) : dir.status();
  if (!path.ok()) {
    diag.Error(mark, absl::StrCat(section, ": ", path.status().message()));
    return std::nullopt;
  }
  Diagnostics preset_diag(*path);
  std::optional<PipelineOptions> pipeline;
  // yaml-cpp throws; this is its edge for the preset file.
  try {
    const YAML::Node body = YAML::LoadFile(*path);
    MapEntry preset = e;
    preset.value = body;
    preset.value_mark = MarkOf(body, YAML::Mark());
    if (!body.IsDefined() || body.IsNull()) {
      preset_diag.Error(YAML::Mark(),
                        "the preset is empty; expected a list of ops");
    } else {
      pipeline = ReadPipelineBody(preset, preset_diag);
    }
  } catch (const YAML::Exception& error) {
    preset_diag.Error(error.mark, absl::StrCat("invalid YAML: ", error.msg));
  }
  if (!preset_diag.ok()) {
    diag.Error(mark, absl::StrCat(section, ": preset '", *name,
                                  "' has mistakes:\n",
                                  preset_diag.ToStatus().message()));
    return std::nullopt;
  }
  pipeline->line = e.key_node.Mark().line + 1;
  return pipeline;
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
                                           const std::string& presets_dir,
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
  for (const MapEntry& e : ReadMap(entry.value, "pipelines", diag)) {
    if (!CheckName(e, "pipeline", diag)) continue;
    std::optional<PipelineOptions> pipeline =
        e.value.IsMap() && e.value["preset"]
            ? ReadPresetPipeline(e, presets_dir, diag)
            : ReadPipelineBody(e, diag);
    if (pipeline) pipelines.push_back(std::move(*pipeline));
  }
  return pipelines;
}

}  // namespace stoker::config::internal
