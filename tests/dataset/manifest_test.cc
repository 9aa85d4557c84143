#include "server/dataset/manifest.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

using ::testing::HasSubstr;

Manifest TwoShards() {
  Manifest m;
  m.name = "train";
  m.num_samples = 10;
  m.fields = {{"image", FieldKind::kBytes, "image/jpeg"},
              {"label", FieldKind::kInt64, ""}};
  m.classes = {"cat", "dog"};
  m.shards = {{"shard-00000.lmdb", 0, 5, 40960},
              {"shard-00001.lmdb", 5, 5, 45056}};
  m.created = "2024-05-01T12:00:00Z";
  m.source = "/data/raw";
  return m;
}

// The error ParseManifest gives for TwoShards() after `edit`.
std::string ErrorAfter(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(SerializeManifest(TwoShards()));
  edit(j);
  return ParseManifest(j.dump(), "/d/manifest.json").status().ToString();
}

TEST(ManifestTest, RoundTripsThroughJson) {
  const Manifest m = TwoShards();
  absl::StatusOr<Manifest> back = ParseManifest(SerializeManifest(m), "m");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SerializeManifest(*back), SerializeManifest(m));
  EXPECT_EQ(back->fields[1].kind, FieldKind::kInt64);
  EXPECT_EQ(back->shards[1].first_id, 5u);
  EXPECT_EQ(back->classes[1], "dog");
}

TEST(ManifestTest, OptionalKeysMayBeLeftOut) {
  absl::StatusOr<Manifest> m = ParseManifest(
      R"({"format_version": 1, "name": "n", "num_samples": 1,
          "fields": [{"name": "image", "kind": "bytes"}],
          "shards": [{"file": "a", "first_id": 0, "num_samples": 1,
                      "bytes": 4096}]})",
      "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->classes.empty());
  EXPECT_EQ(m->fields[0].content_type, "");
}

TEST(ManifestTest, ErrorsNameThePathAndTheKey) {
  const std::string prefix = "INVALID_ARGUMENT: manifest /d/manifest.json: ";
  EXPECT_EQ(ErrorAfter([](auto& j) { j.erase("num_samples"); }),
            prefix + "num_samples: missing");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["colour"] = "red"; }),
            prefix + "colour: unknown key");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["format_version"] = 2; }),
            prefix + "format_version: is 2, this build reads 1");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["name"] = 3; }),
            prefix + "name: expected a string");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["fields"][1]["kind"] = "float"; }),
            prefix + "fields[1].kind: is 'float', expected bytes|int64");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["fields"][1]["name"] = "image"; }),
            prefix + "fields[1].name: duplicate field 'image'");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["classes"][0] = 1; }),
            prefix + "classes[0]: expected a string");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["shards"][1]["num_samples"] = "5"; }),
            prefix + "shards[1].num_samples: expected a non-negative integer");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["shards"][1]["bytes"] = -1; }),
            prefix + "shards[1].bytes: expected a non-negative integer");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["shards"][0]["extra"] = 1; }),
            prefix + "shards[0].extra: unknown key");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["shards"] = nlohmann::json::array(); }),
            prefix + "shards: expected a non-empty array");
}

TEST(ManifestTest, RejectsShardRangesThatAreNotContiguousOrDoNotAddUp) {
  const std::string prefix = "INVALID_ARGUMENT: manifest /d/manifest.json: ";
  EXPECT_EQ(ErrorAfter([](auto& j) { j["shards"][1]["first_id"] = 6; }),
            prefix +
                "shards[1].first_id: is 6, expected 5 (shard ranges "
                "must be contiguous)");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["num_samples"] = 11; }),
            prefix + "shards: hold 10 samples, num_samples is 11");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["shards"][0]["num_samples"] = 0; }),
            prefix + "shards[0].num_samples: is 0");
}

TEST(ManifestTest, RejectsShardFilesOutsideTheDatasetFolder) {
  EXPECT_THAT(ErrorAfter([](auto& j) { j["shards"][0]["file"] = "../x"; }),
              HasSubstr("shards[0].file: '../x' is not a plain file name"));
  EXPECT_THAT(ErrorAfter([](auto& j) { j["shards"][1]["file"] = "/etc/x"; }),
              HasSubstr("shards[1].file: '/etc/x' is not a plain file name"));
  EXPECT_THAT(
      ErrorAfter([](auto& j) { j["shards"][1]["file"] = "shard-00000.lmdb"; }),
      HasSubstr("shards[1].file: duplicate file 'shard-00000.lmdb'"));
}

TEST(ManifestTest, RejectsTextThatIsNotJson) {
  EXPECT_EQ(ParseManifest("{\"name\": ", "m.json").status().ToString(),
            "INVALID_ARGUMENT: manifest m.json: (document): not valid JSON");
}

TEST(ManifestTest, ReadManifestReadsTheFileInTheFolder) {
  testing::ScopedTempDir tmp;
  ASSERT_TRUE(testing::WriteTestFile(tmp.path() + "/manifest.json",
                                     SerializeManifest(TwoShards()))
                  .ok());
  absl::StatusOr<Manifest> m = ReadManifest(tmp.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "train");
}

TEST(ManifestTest, ReadManifestReturnsNotFoundForAFolderWithoutOne) {
  testing::ScopedTempDir tmp;
  const absl::Status s = ReadManifest(tmp.path()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(tmp.path() + "/manifest.json"));
}

}  // namespace
}  // namespace stoker::dataset
