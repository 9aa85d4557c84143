#include "server/config/presets.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/config/flag_config.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::stoker::config::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSourcePresets =
    std::string(STOKER_SOURCE_DIR) + "/config/presets";

// A config with one dataset (an empty folder: nothing reads it) and the
// pipelines in `pipelines`, loaded with presets from `presets_dir`.
absl::StatusOr<ServerOptions> Load(const TempDir& dir,
                                   const std::string& pipelines,
                                   const std::string& presets_dir) {
  dir.MakeDir("data");
  const std::string yaml = absl::StrCat(
      "listen: {unix: s.sock}\ndatasets: {train: {path: data}}\n"
      "pipelines:\n",
      pipelines);
  return LoadConfigString(yaml, (dir.path() / "stoker.yaml").string(),
                          LoadOptions{presets_dir});
}

TEST(PresetsTest, APipelineTakesThePresetsOps) {
  TempDir dir;
  dir.WriteFile("presets/small.yaml",
                "# small: a test preset.\n- decode_image\n"
                "- center_crop: {size: 8}\n");
  auto options = Load(dir, "  train: {preset: small}\n",
                      (dir.path() / "presets").string());
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_EQ(options->pipelines.size(), 1u);
  const PipelineOptions& p = options->pipelines[0];
  EXPECT_EQ(p.name, "train");
  ASSERT_EQ(p.ops.size(), 2u);
  EXPECT_EQ(p.ops[0].name, "decode_image");
  EXPECT_EQ(p.ops[1].name, "center_crop");
  EXPECT_EQ(p.line, 4);
}

TEST(PresetsTest, AnUnknownPresetNamesTheFolderAndThePresetsItHas) {
  TempDir dir;
  dir.WriteFile("presets/a.yaml", "- decode_image\n");
  dir.WriteFile("presets/b.yaml", "- decode_image\n");
  auto options = Load(dir, "  train: {preset: imagenet_trian}\n",
                      (dir.path() / "presets").string());
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(),
              HasSubstr("stoker.yaml:4:19: pipeline 'train': unknown preset "
                        "'imagenet_trian'"));
  EXPECT_THAT(options.status().message(), HasSubstr("expected one of: a, b"));
}

TEST(PresetsTest, AMistakeInAPresetNamesThePresetFileAndLine) {
  TempDir dir;
  dir.WriteFile("presets/bad.yaml", "- decode_image\n- resise: {size: 8}\n");
  auto options = Load(dir, "  train: {preset: bad}\n",
                      (dir.path() / "presets").string());
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(),
              HasSubstr("pipeline 'train': preset 'bad' has mistakes"));
  EXPECT_THAT(options.status().message(),
              HasSubstr(absl::StrCat((dir.path() / "presets/bad.yaml").string(),
                                     ":2:3: unknown op 'resise'")));
}

TEST(PresetsTest, APresetMapTakesNoOtherKey) {
  TempDir dir;
  dir.WriteFile("presets/a.yaml", "- decode_image\n");
  auto options = Load(dir, "  train: {preset: a, views: {}}\n",
                      (dir.path() / "presets").string());
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("views"));
}

TEST(PresetsTest, EveryShippedPresetLoads) {
  const std::vector<std::string> names = ListPresets(kSourcePresets);
  EXPECT_THAT(names, ElementsAre("deit", "dino", "imagenet_train",
                                 "imagenet_val", "raw", "torchvision_recipe"));
  for (const std::string& name : names) {
    TempDir dir;
    auto options = Load(dir, absl::StrCat("  p: {preset: ", name, "}\n"),
                        kSourcePresets);
    EXPECT_TRUE(options.ok()) << name << ": " << options.status();
  }
}

TEST(PresetsTest, TheReferenceListsEachPresetWithItsComment) {
  const std::string text = PresetReference(kSourcePresets);
  EXPECT_THAT(text, HasSubstr("| `dino` | DINO's multi-crop views"));
  EXPECT_THAT(text, HasSubstr("| `raw` | decoded images as uint8"));
}

TEST(PresetsTest, AGivenFolderThatIsMissingIsAnError) {
  auto dir = FindPresetsDir("/nonexistent/presets");
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("/nonexistent/presets"));
}

TEST(PresetsTest, ANameWithASlashIsNotAPreset) {
  auto path = PresetPath(kSourcePresets, "../stokerd");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FlagConfigTest, FlagsMakeAConfigThatLoads) {
  TempDir dir;
  const std::string data = dir.MakeDir("data").string();
  auto yaml = ConfigFromFlags(
      {{absl::StrCat("train=", data)},
       {"train=imagenet_train", "raw"},
       absl::StrCat("unix:", (dir.path() / "s.sock").string())});
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  auto options =
      LoadConfigString(*yaml, "command line", LoadOptions{kSourcePresets});
  ASSERT_TRUE(options.ok()) << options.status() << "\n" << *yaml;
  EXPECT_EQ(options->listen.unix_path, (dir.path() / "s.sock").string());
  ASSERT_EQ(options->datasets.size(), 1u);
  EXPECT_EQ(options->datasets[0].path, data);
  ASSERT_EQ(options->pipelines.size(), 2u);
  EXPECT_EQ(options->pipelines[0].name, "train");
  EXPECT_EQ(options->pipelines[1].name, "raw");
  EXPECT_EQ(options->workers, 0);
}

TEST(FlagConfigTest, ADatasetWithoutANameIsAnError) {
  auto yaml = ConfigFromFlags({{"/data/train"}, {"raw"}, ""});
  ASSERT_FALSE(yaml.ok());
  EXPECT_THAT(yaml.status().message(),
              HasSubstr("--dataset '/data/train': expected NAME=VALUE"));
}

TEST(FlagConfigTest, NoPipelineIsAnError) {
  auto yaml = ConfigFromFlags({{"train=/data"}, {}, ""});
  ASSERT_FALSE(yaml.ok());
  EXPECT_THAT(yaml.status().message(), HasSubstr("--pipeline NAME=PRESET"));
}

}  // namespace
}  // namespace stoker::config
