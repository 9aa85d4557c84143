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
  m.fields = {MakeFieldSpec("image", "image").value(),
              MakeFieldSpec("label", "int64").value()};
  m.fields[0].max_length = 9000;
  m.fields[0].formats = {{"jpeg", 9}, {"png", 1}};
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

// TwoShards() with one field of every other kind.
Manifest EveryKind() {
  Manifest m = TwoShards();
  m.fields.push_back(
      MakeArraySpec("tokens", tensor::DType::kInt32, {-1}).value());
  m.fields.back().max_length = 2048;
  m.fields.push_back(
      MakeArraySpec("boxes", tensor::DType::kFloat32, {-1, 4}).value());
  m.fields.push_back(
      MakeArraySpec("embedding", tensor::DType::kFloat16, {2, 3}).value());
  m.fields.push_back(MakeFieldSpec("weight", "float32").value());
  m.fields.push_back(MakeFieldSpec("target", "float64").value());
  m.fields.push_back(MakeFieldSpec("caption", "str").value());
  m.fields.back().max_length = 311;
  m.fields.push_back(MakeFieldSpec("raw", "bytes").value());
  return m;
}

TEST(ManifestTest, RoundTripsEveryKindThroughJson) {
  const Manifest m = EveryKind();
  const std::string json = SerializeManifest(m);
  absl::StatusOr<Manifest> back = ParseManifest(json, "m");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SerializeManifest(*back), json);
  EXPECT_EQ(back->format_version, 2);
  ASSERT_EQ(back->fields.size(), m.fields.size());
  for (size_t i = 0; i < m.fields.size(); ++i) {
    const FieldSpec& a = m.fields[i];
    const FieldSpec& b = back->fields[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind) << a.name;
    EXPECT_EQ(a.dtype, b.dtype) << a.name;
    EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(a.max_length, b.max_length) << a.name;
    EXPECT_EQ(a.formats, b.formats) << a.name;
  }
  EXPECT_EQ(back->shards[1].first_id, 5u);
  EXPECT_EQ(back->classes[1], "dog");
  // The keys each kind writes, as a reader of the JSON sees them.
  const nlohmann::json fields = nlohmann::json::parse(json).at("fields");
  EXPECT_EQ(fields[0].dump(),
            R"({"formats":{"jpeg":9,"png":1},"kind":"image","max_length":9000,)"
            R"("name":"image"})");
  EXPECT_EQ(fields[1].dump(), R"({"kind":"int64","name":"label"})");
  EXPECT_EQ(fields[3].dump(),
            R"({"dtype":"float32","kind":"ndarray","name":"boxes",)"
            R"("shape":[-1,4]})");
  EXPECT_EQ(fields[7].dump(),
            R"({"kind":"str","max_length":311,"name":"caption"})");
}

// What `stoker pack` wrote before format version 2.
constexpr char kVersion1[] = R"({
  "format_version": 1,
  "name": "train",
  "num_samples": 3,
  "fields": [{"name": "image", "kind": "bytes", "content_type": "image/jpeg"},
             {"name": "label", "kind": "int64", "content_type": ""}],
  "classes": ["cat", "dog"],
  "shards": [{"file": "shard-00000.lmdb", "first_id": 0, "num_samples": 3,
              "bytes": 98304}],
  "created": "2024-05-01T12:00:00Z",
  "source": "/data/raw/train"
})";

TEST(ManifestTest, ReadsAVersion1ManifestAsImageAndLabel) {
  absl::StatusOr<Manifest> m = ParseManifest(kVersion1, "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 1);
  ASSERT_EQ(m->fields.size(), 2u);
  EXPECT_EQ(m->fields[0].name, "image");
  EXPECT_EQ(m->fields[0].kind->name(), "image");
  EXPECT_TRUE(m->fields[0].kind->spatial());
  EXPECT_EQ(m->fields[0].max_length, 0u);  // Unknown.
  EXPECT_TRUE(m->fields[0].formats.empty());
  EXPECT_EQ(m->fields[1].kind->name(), "int64");
  EXPECT_EQ(m->fields[1].dtype, tensor::DType::kInt64);
  // Written back, it is version 2.
  const nlohmann::json v2 = nlohmann::json::parse(SerializeManifest(*m));
  EXPECT_EQ(v2.at("format_version"), 2);
  EXPECT_EQ(
      v2.at("fields").dump(),
      R"([{"kind":"image","name":"image"},{"kind":"int64","name":"label"}])");
}

TEST(ManifestTest, AVersion1BytesFieldThatIsNoImageStaysBytes) {
  nlohmann::json j = nlohmann::json::parse(kVersion1);
  j["fields"][0]["content_type"] = "application/octet-stream";
  j["fields"].push_back({{"name", "extra"}, {"kind", "bytes"}});
  absl::StatusOr<Manifest> m = ParseManifest(j.dump(), "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->fields[0].kind->name(), "bytes");
  EXPECT_EQ(m->fields[2].kind->name(), "bytes");
  j["fields"][1]["kind"] = "ndarray";
  EXPECT_EQ(ParseManifest(j.dump(), "m").status().ToString(),
            "INVALID_ARGUMENT: manifest m: fields[1].kind: is 'ndarray', "
            "expected bytes|int64 (format version 1)");
  j["fields"][1] = {{"name", "label"}, {"kind", "int64"}, {"dtype", "int64"}};
  EXPECT_EQ(ParseManifest(j.dump(), "m").status().ToString(),
            "INVALID_ARGUMENT: manifest m: fields[1].dtype: unknown key");
}

TEST(ManifestTest, OptionalKeysMayBeLeftOut) {
  absl::StatusOr<Manifest> m = ParseManifest(
      R"({"format_version": 2, "name": "n", "num_samples": 1,
          "fields": [{"name": "image", "kind": "image"}],
          "shards": [{"file": "a", "first_id": 0, "num_samples": 1,
                      "bytes": 4096}]})",
      "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->classes.empty());
  EXPECT_EQ(m->fields[0].max_length, 0u);
}

TEST(ManifestTest, FieldErrorsNameTheFieldAndTheKey) {
  const std::string prefix = "INVALID_ARGUMENT: manifest /d/manifest.json: ";
  const auto error_after =
      [](const std::function<void(nlohmann::json&)>& edit) {
        nlohmann::json j =
            nlohmann::json::parse(SerializeManifest(EveryKind()));
        edit(j);
        return ParseManifest(j.dump(), "/d/manifest.json").status().ToString();
      };
  EXPECT_EQ(error_after([](auto& j) { j["fields"][1]["kind"] = "float"; }),
            prefix +
                "fields[1].kind: is 'float', expected one of bytes, float32, "
                "float64, image, int64, ndarray, str");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][2].erase("dtype"); }),
            prefix + "fields[2].dtype: missing (an ndarray field declares it)");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][2].erase("shape"); }),
            prefix + "fields[2].shape: missing (an ndarray field declares it)");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][1]["dtype"] = "int32"; }),
            prefix +
                "fields[1].dtype: a field of kind int64 has none (the kind "
                "implies it)");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][0]["shape"] = {-1}; }),
            prefix +
                "fields[0].shape: a field of kind image has none (the kind "
                "implies it)");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][2]["dtype"] = "float"; }),
            prefix +
                "fields[2].dtype: is 'float', expected bool, uint8, int8, "
                "uint16, int16, int32, int64, float16, float32 or float64");
  EXPECT_EQ(
      error_after([](auto& j) {
        j["fields"][3]["shape"] = {4, -1};
      }),
      prefix + "fields[3].shape: dimension 1 is -1; only the first may vary");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][3]["shape"] = "[-1, 4]"; }),
            prefix + "fields[3].shape: expected an array");
  EXPECT_EQ(error_after([](auto& j) {
              j["fields"][3]["shape"] = {-1, 0.5};
            }),
            prefix + "fields[3].shape: expected an array of integers");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][4]["max_length"] = 2; }),
            prefix +
                "fields[4].max_length: only a field of variable length has "
                "one");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][1]["max_length"] = 2; }),
            prefix +
                "fields[1].max_length: only a field of variable length has "
                "one");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][2]["max_length"] = -2; }),
            prefix + "fields[2].max_length: expected a non-negative integer");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][7]["formats"] = {}; }),
            prefix + "fields[7].formats: only an image field has them");
  EXPECT_EQ(
      error_after([](auto& j) { j["fields"][0]["formats"]["png"] = "1"; }),
      prefix + "fields[0].formats.png: expected a non-negative integer");
  EXPECT_EQ(error_after([](auto& j) { j["fields"][0]["content_type"] = ""; }),
            prefix + "fields[0].content_type: unknown key");
}

TEST(ManifestTest, ErrorsNameThePathAndTheKey) {
  const std::string prefix = "INVALID_ARGUMENT: manifest /d/manifest.json: ";
  EXPECT_EQ(ErrorAfter([](auto& j) { j.erase("num_samples"); }),
            prefix + "num_samples: missing");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["colour"] = "red"; }),
            prefix + "colour: unknown key");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["format_version"] = 3; }),
            prefix + "format_version: is 3, this build reads 1 to 2");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["format_version"] = 0; }),
            prefix + "format_version: is 0, this build reads 1 to 2");
  EXPECT_EQ(ErrorAfter([](auto& j) { j["name"] = 3; }),
            prefix + "name: expected a string");
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

TEST(ManifestTest, RoundTripsShardDigestsAndRecordIndexes) {
  Manifest m = TwoShards();
  m.shards[1].digest = "xxh3-128:" + std::string(32, 'a');
  m.shards[1].index_file = "shard-00001.idx";
  m.shards[1].index_bytes = 112;
  m.shards[1].index_digest = "xxh3-128:" + std::string(32, 'b');
  const std::string json = SerializeManifest(m);
  absl::StatusOr<Manifest> back = ParseManifest(json, "m");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SerializeManifest(*back), json);
  EXPECT_FALSE(back->shards[0].has_index());
  EXPECT_EQ(back->shards[0].digest, "");
  EXPECT_EQ(back->shards[1].digest, m.shards[1].digest);
  EXPECT_EQ(back->shards[1].index_file, "shard-00001.idx");
  EXPECT_EQ(back->shards[1].index_bytes, 112u);
  EXPECT_EQ(back->shards[1].index_digest, m.shards[1].index_digest);
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"digest\": \"\"")));
}

TEST(ManifestTest, RejectsMalformedShardDigestsAndIndexes) {
  EXPECT_THAT(ErrorAfter([](auto& j) { j["shards"][0]["digest"] = "md5:1"; }),
              HasSubstr("shards[0].digest: is 'md5:1', expected xxh3-128: "
                        "and 32 hex digits"));
  const std::string good = "xxh3-128:" + std::string(32, '0');
  EXPECT_THAT(ErrorAfter([&](auto& j) {
                j["shards"][0]["index"] = {
                    {"file", "../x"}, {"bytes", 8}, {"digest", good}};
              }),
              HasSubstr("shards[0].index.file: '../x' is not a plain file"));
  EXPECT_THAT(ErrorAfter([&](auto& j) {
                j["shards"][0]["index"] = {{"file", "a.idx"}, {"bytes", 8}};
              }),
              HasSubstr("shards[0].index.digest: missing"));
  EXPECT_THAT(ErrorAfter([&](auto& j) {
                j["shards"][1]["index"] = {{"file", "shard-00000.lmdb"},
                                           {"bytes", 8},
                                           {"digest", good}};
              }),
              HasSubstr("duplicate file 'shard-00000.lmdb'"));
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
