#include "server/config/config_reference.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/config/op_config_reader.h"
#include "server/config/presets.h"
#include "server/pipeline/registry.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

TEST(AllowedKeysTest, ListsTheDirectChildrenOfASection) {
  EXPECT_THAT(AllowedKeys(""),
              ElementsAre("listen", "workers", "prefetch", "memory_budget",
                          "device_memory_budget", "on_corrupt", "limits",
                          "sharing", "helpers", "jobs", "metrics", "datasets",
                          "storage", "pipelines"));
  EXPECT_THAT(AllowedKeys("listen"),
              ElementsAre("unix", "tcp", "unix_mode", "unix_group", "tls",
                          "insecure_remote"));
  EXPECT_THAT(AllowedKeys("listen.tls"),
              ElementsAre("cert", "key", "client_ca"));
  EXPECT_THAT(
      AllowedKeys("limits"),
      ElementsAre("max_batch_size", "max_prefetch", "default_prefetch",
                  "max_streams", "max_streams_per_peer", "admission_wait",
                  "max_batch_bytes", "max_decode_pixels"));
  EXPECT_THAT(AllowedKeys("sharing"), ElementsAre("lag_window"));
  EXPECT_THAT(
      AllowedKeys("helpers"),
      ElementsAre("addresses", "dns", "dns_refresh_seconds", "placement",
                  "saturated_ms", "idle_ms", "stall_share", "raw", "compress",
                  "tls", "insecure", "chunk_steps", "streams",
                  "stall_seconds"));
  EXPECT_THAT(AllowedKeys("helpers.tls"),
              ElementsAre("ca", "cert", "key", "server_name"));
  EXPECT_THAT(AllowedKeys("jobs.JOB"), ElementsAre("weight"));
  EXPECT_THAT(AllowedKeys("metrics"), ElementsAre("listen"));
  EXPECT_THAT(AllowedKeys("datasets.NAME"), ElementsAre("path", "source"));
  EXPECT_THAT(AllowedKeys("storage"),
              ElementsAre("cache_limit", "parallel", "chunk_size", "piece_size",
                          "read_parallel", "read_ahead", "read_block",
                          "read_cache", "retries",
                          "s3"));
  EXPECT_THAT(AllowedKeys("storage.s3"),
              ElementsAre("region", "endpoint", "profile", "credentials_file"));
  EXPECT_THAT(AllowedKeys("nothing"), IsEmpty());
}

TEST(ConfigReferenceTest, HasARowForEveryKeyWithADefault) {
  const std::string reference = ConfigReference();
  for (const char* section : {"", "listen", "listen.tls", "limits", "sharing",
                              "helpers", "metrics"}) {
    for (const std::string& key : AllowedKeys(section)) {
      const std::string dotted =
          *section == '\0' ? key : absl::StrCat(section, ".", key);
      EXPECT_THAT(reference, HasSubstr(absl::StrCat("| `", dotted, "` | ")));
    }
  }
  // Every row of the key table has four non-empty cells.
  for (absl::string_view line : absl::StrSplit(reference, '\n')) {
    if (!absl::StartsWith(line, "| `")) continue;
    EXPECT_THAT(line, Not(HasSubstr("|  |"))) << line;
  }
}

TEST(StorageDefaultsTest, ReadBlockIsOnAndZeroTurnsItOff) {
  EXPECT_NE(StorageOptions().read_block, 0u);
  const absl::StatusOr<ServerOptions> options = LoadConfigString(
      "listen: {unix: /tmp/s.sock}\nstorage: {read_block: 0}\n"
      "datasets: {t: {path: staged/t, source: \"s3://b/t\"}}\n"
      "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n",
      "stoker.yaml");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->storage.read_block, 0u);
}

TEST(ConfigReferenceTest, PrintsDefaultsFromServerOptions) {
  const std::string reference = ConfigReference();
  EXPECT_THAT(reference, HasSubstr("| `memory_budget` | size | 2GiB |"));
  EXPECT_THAT(reference,
              HasSubstr("| `device_memory_budget` | size | 2GiB | Bytes of "
                        "GPU memory the cuda_ipc streams may hold on each "
                        "GPU"));
  EXPECT_THAT(reference, HasSubstr("| `workers` | `auto` or 1..1024 | auto |"));
  EXPECT_THAT(reference,
              HasSubstr("| `limits.max_batch_bytes` | size | 1GiB |"));
  EXPECT_THAT(reference,
              HasSubstr("| `listen.unix_mode` | octal string | \"0660\" |"));
  EXPECT_THAT(reference,
              HasSubstr("| `limits.max_batch_size` | integer >= 1 | 4096 |"));
}

TEST(ConfigReferenceTest, ListsEveryRegisteredOp) {
  const std::string reference = ConfigReference();
  const std::vector<std::string> names = pipeline::OpRegistry::Global().Names();
  ASSERT_THAT(names, Not(IsEmpty()));
  for (const std::string& name : names) {
    EXPECT_THAT(reference, HasSubstr(absl::StrCat("| `", name, "` | ")));
  }
}

// The row of op `name` in the reference's op table, or "" if none.
std::string OpRow(const std::string& reference, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(reference, '\n')) {
    if (absl::StartsWith(line, absl::StrCat("| `", name, "` | "))) {
      return std::string(line);
    }
  }
  return "";
}

// Iterates the registry, so an op added later is checked without editing
// this test.
TEST(ConfigReferenceTest, ListsEachOpsKindArgumentsRangesAndExample) {
  const std::string reference = ConfigReference();
  const pipeline::OpRegistry& registry = pipeline::OpRegistry::Global();
  for (const std::string& name : registry.Names()) {
    const pipeline::OpDef* def = registry.Find(name);
    ASSERT_NE(def, nullptr);
    const std::string row = OpRow(reference, name);
    ASSERT_FALSE(row.empty()) << name;
    const std::string_view kind = pipeline::OpKindName(def->kind);
    EXPECT_THAT(row, StartsWith(absl::StrCat("| `", name, "` | ",
                                             std::string(kind), " | ")));
    EXPECT_THAT(row, HasSubstr(absl::StrCat("`", def->example, "`")));
    EXPECT_THAT(row, HasSubstr(def->doc));
    for (const pipeline::ArgSpec& spec : def->args) {
      const std::string_view type = pipeline::ArgTypeName(spec.type);
      EXPECT_THAT(row, HasSubstr(absl::StrCat("`", spec.name,
                                              "`: ", std::string(type))))
          << name;
      EXPECT_THAT(row, HasSubstr(spec.doc)) << name << "." << spec.name;
      if (spec.default_value.has_value()) {
        EXPECT_THAT(row,
                    HasSubstr(absl::StrCat(
                        " = ", internal::FormatArgValue(*spec.default_value))))
            << name << "." << spec.name;
      }
      if (spec.required) {
        EXPECT_THAT(row, HasSubstr(", required"));
      }
      if (!pipeline::RangeText(spec).empty()) {
        EXPECT_THAT(row, HasSubstr(pipeline::RangeText(spec)))
            << name << "." << spec.name;
      }
      for (const std::string& choice : spec.choices) {
        EXPECT_THAT(row, HasSubstr(choice)) << name << "." << spec.name;
      }
    }
  }
}

// The pipeline an op's example is tried in: decode ops first, pixel and
// format ops after the geometry, so that Create accepts it; empty for kinds
// that no pipeline can run yet.
std::string PipelineAround(const pipeline::OpDef& def) {
  const std::string step = absl::StrCat("    - ", def.example, "\n");
  switch (def.kind) {
    case pipeline::OpKind::kDecode:
      return absl::StrCat(step, "    - center_crop: {size: 8}\n");
    case pipeline::OpKind::kFields:
    case pipeline::OpKind::kGeometry:
      return absl::StrCat("    - decode_jpeg\n", step,
                          "    - center_crop: {size: 8}\n");
    case pipeline::OpKind::kPixel:
    case pipeline::OpKind::kFormat:
      return absl::StrCat("    - decode_jpeg\n    - center_crop: {size: 8}\n",
                          step);
    case pipeline::OpKind::kTensor:
    case pipeline::OpKind::kBatch:
      return absl::StrCat(
          "    - decode_jpeg\n    - center_crop: {size: 8}\n"
          "    - normalize: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]}\n",
          step);
    default:
      return "";
  }
}

TEST(ConfigReferenceTest, EveryOpsExampleLoads) {
  testing::TempDir dir;
  dir.MakeDir("d");
  const pipeline::OpRegistry& registry = pipeline::OpRegistry::Global();
  for (const std::string& name : registry.Names()) {
    const pipeline::OpDef* def = registry.Find(name);
    ASSERT_NE(def, nullptr);
    const std::string steps = PipelineAround(*def);
    if (steps.empty()) {
      ADD_FAILURE() << name << " is of kind "
                    << std::string(pipeline::OpKindName(def->kind))
                    << ": teach PipelineAround where it stands";
      continue;
    }
    const std::string yaml = absl::StrCat(
        "listen: {unix: s.sock}\ndatasets: {d: {path: ",
        (dir.path() / "d").string(), "}}\npipelines:\n  p:\n", steps);
    const absl::StatusOr<ServerOptions> options =
        LoadConfigString(yaml, "stoker.yaml");
    EXPECT_TRUE(options.ok()) << name << ": " << options.status() << "\n"
                              << yaml;
  }
}

// docs/config.md is what docs/gen-config.sh writes: a line that says so,
// a blank line, then what `stokerd --help-config --presets config/presets`
// prints (the keys, the ops, the source tree's presets). A change to a key's
// or an op's declaration, or to a preset, must be followed by running it.
TEST(ConfigReferenceTest, DocsConfigMdIsWhatHelpConfigPrints) {
  std::ifstream file(std::string(STOKER_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(file.good()) << "cannot read docs/config.md";
  std::stringstream doc;
  doc << file.rdbuf();
  const std::string text = doc.str();
  EXPECT_THAT(text, StartsWith("<!-- Generated by docs/gen-config.sh"));
  const size_t body = text.find("\n\n");
  ASSERT_NE(body, std::string::npos);
  // The script names the presets folder relative to the tree, as here.
  const std::string presets_dir =
      std::string(STOKER_SOURCE_DIR) + "/config/presets";
  const std::string presets = absl::StrReplaceAll(
      PresetReference(presets_dir),
      {{absl::StrCat("From ", presets_dir, ";"), "From config/presets;"}});
  const std::string expected =
      absl::StrCat(ConfigReference(), "\n", presets);
  EXPECT_TRUE(text.substr(body + 2) == expected)
      << "docs/config.md differs from `stokerd --help-config`: run "
         "docs/gen-config.sh";
}

}  // namespace
}  // namespace stoker::config
