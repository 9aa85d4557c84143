// Invalid configs, their shape: YAML syntax, unknown, duplicate and missing
// keys, empty or extra documents. Each is rejected with InvalidArgument and a
// message "stoker.yaml:LINE:COL: what was wrong; what was expected".

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::stoker::config::testing::ConfigErrorTest;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(ConfigErrorTest, YamlSyntaxErrorPointsAtTheParserMark) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: [a, b
pipelines: {}
)"),
            "stoker.yaml:4:10: invalid YAML: end of sequence flow not found");
}

TEST_F(ConfigErrorTest, BadIndentationIsASyntaxError) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
  workers: 4
)"),
              StartsWith("stoker.yaml:3:3: invalid YAML: "));
}

TEST_F(ConfigErrorTest, UnknownTopLevelKeySuggestsTheClosest) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
workrs: 4
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:1: unknown key 'workrs' (did you mean 'workers'?); "
            "expected one of: datasets, device_memory_budget, helpers, jobs, "
            "limits, listen, memory_budget, "
            "metrics, on_corrupt, pipelines, prefetch, sharing, storage, "
            "workers");
}

TEST_F(ConfigErrorTest, UnknownNestedKeyListsTheAllowedKeys) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
limits:
  max_batch_size: 8
  max_bach_bytes: 1GiB
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:5:3: unknown key 'max_bach_bytes' in limits (did you "
            "mean 'max_batch_bytes'?); expected one of: admission_wait, "
            "default_prefetch, max_batch_bytes, max_batch_size, "
            "max_decode_pixels, max_prefetch, max_streams, "
            "max_streams_per_peer");
}

TEST_F(ConfigErrorTest, UnknownKeyInDatasetIsRejected) {
  EXPECT_EQ(
      Error(R"(
listen: {unix: s.sock}
datasets:
  d: {path: $D, shuffle: true}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
      absl::StrCat("stoker.yaml:4:", 15 + (dir_.path() / "d").string().size(),
                   ": unknown key 'shuffle' in dataset 'd'; expected "
                   "one of: path, source"));
}

TEST_F(ConfigErrorTest, DuplicateKeyNamesBothLines) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
workers: 4
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
workers: 8
)"),
            "stoker.yaml:6:1: duplicate key 'workers' (first at line 3); "
            "expected each key once");
}

TEST_F(ConfigErrorTest, DuplicateDatasetNameIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets:
  d: {path: $D}
  d: {path: $D}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:5:3: duplicate key 'd' in datasets (first at line 4); "
            "expected each key once");
}

TEST_F(ConfigErrorTest, MissingRequiredTopLevelKeyIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:2:1: missing required key 'datasets'; expected e.g. "
            "`datasets: {train: {path: /data/train}}`");
}

TEST_F(ConfigErrorTest, EmptyDatasetsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:11: datasets is empty; expected at least one, like "
            "{train: {path: /data/train}}");
}

TEST_F(ConfigErrorTest, EmptyPipelinesIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
)"),
            "stoker.yaml:4:1: pipelines: expected a map like {train: "
            "[decode_jpeg, center_crop: {size: 224}]}, got nothing");
}

TEST_F(ConfigErrorTest, EmptyConfigIsRejected) {
  EXPECT_EQ(Error("# nothing here\n"),
            "stoker.yaml:1:1: the config is empty; expected a map with at "
            "least listen, datasets and pipelines");
}

TEST_F(ConfigErrorTest, SecondYamlDocumentIsRejected) {
  EXPECT_THAT(Error("listen: {unix: s.sock}\n---\nworkers: 2\n"),
              HasSubstr("the config has 2 YAML documents; expected one"));
}

// Found by tests/fuzz: yaml-cpp's LoadAll allocates empty documents forever
// on a lone ",".
TEST_F(ConfigErrorTest, StrayTopLevelCommaIsRejectedNotLoopedOn) {
  EXPECT_THAT(Error(","), HasSubstr("stoker.yaml:1:1: invalid YAML: the "
                                    "parser does not advance here"));
  EXPECT_THAT(Error("listen: {unix: s.sock}\n---\n,\n"),
              HasSubstr("invalid YAML"));
}

TEST_F(ConfigErrorTest, ReportsEveryMistakeAtOnce) {
  const std::string message = Error(R"(
listen: {unix: s.sock}
workers: many
memory_budget: lots
datasets: {d: {path: $D}}
pipelines:
  p:
    - decode_jpeg: {x: 1}
)");
  EXPECT_THAT(message, HasSubstr("stoker.yaml:3:10: workers: "));
  EXPECT_THAT(message, HasSubstr("\nstoker.yaml:4:16: memory_budget: "));
  EXPECT_THAT(message, HasSubstr("\nstoker.yaml:8:21: unknown key 'x'"));
}

}  // namespace
}  // namespace stoker::config
