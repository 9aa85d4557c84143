// Invalid configs: each kind of mistake is rejected with InvalidArgument and
// a message "stoker.yaml:LINE:COL: what was wrong; what was expected" that
// points at the exact place.

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::stoker::config::testing::ErrorOf;
using ::stoker::config::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class ConfigErrorTest : public ::testing::Test {
 protected:
  ConfigErrorTest() { dir_.MakeDir("d"); }

  // The error of loading `yaml` as "stoker.yaml", with $D replaced by an
  // existing dataset directory. Lines in the tests count from the line after
  // R"( because every literal starts with a newline.
  std::string Error(absl::string_view yaml) {
    const std::string text =
        absl::StrReplaceAll(yaml, {{"$D", (dir_.path() / "d").string()}});
    return ErrorOf(LoadConfigString(text, "stoker.yaml"));
  }

  TempDir dir_;
};

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
            "expected one of: datasets, jobs, limits, listen, memory_budget, "
            "metrics, on_corrupt, pipelines, prefetch, sharing, workers");
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
            "default_prefetch, max_batch_bytes, max_batch_size, max_prefetch, "
            "max_streams, max_streams_per_peer");
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
                   "one of: path"));
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

TEST_F(ConfigErrorTest, BadByteSizeNamesTheKeyAndTheValue) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
memory_budget: lots
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:16: memory_budget: expected a size like 2GiB, got "
            "'lots'");
}

TEST_F(ConfigErrorTest, ZeroSizeIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
limits: {max_batch_bytes: 0B}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:27: limits.max_batch_bytes: expected a size above "
            "zero, got '0B'");
}

TEST_F(ConfigErrorTest, WrongTypeForALimitIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
limits:
  max_prefetch: [4]
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:4:17: limits.max_prefetch: expected an integer from "
            "1 to 4294967295, got a list");
}

TEST_F(ConfigErrorTest, DefaultPrefetchAboveMaxPrefetchIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
limits:
  max_prefetch: 2
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:4:17: limits.default_prefetch (4) is above "
            "limits.max_prefetch (2); expected at most 2");
}

TEST_F(ConfigErrorTest, BadWorkersIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
workers: 0
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:10: workers: expected auto or a number of threads "
            "from 1 to 1024, got '0'");
}

TEST_F(ConfigErrorTest, BadOnCorruptIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
on_corrupt: ignore
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:13: on_corrupt: expected skip or fail, got "
            "'ignore'");
}

TEST_F(ConfigErrorTest, ListenWithoutUnixOrTcpIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix_group: stoker}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:2:9: listen has neither unix nor tcp; expected at "
            "least one, like {unix: /run/stoker/stoker.sock}");
}

TEST_F(ConfigErrorTest, UnixModeWithoutUnixSocketIsRejected) {
  EXPECT_EQ(Error(R"(
listen:
  tcp: 127.0.0.1:0
  unix_mode: "0600"
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:4:3: listen.unix_mode is set but listen.unix is not; "
            "expected it only with a unix socket");
}

TEST_F(ConfigErrorTest, BadUnixModeIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock, unix_mode: "0668"}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:2:35: listen.unix_mode: expected octal permission "
            "bits like \"0660\", got '0668'");
}

TEST_F(ConfigErrorTest, TooLongUnixSocketPathIsRejected) {
  const std::string path = "/run/" + std::string(120, 's') + ".sock";
  EXPECT_THAT(Error(absl::StrCat(
                  "\nlisten: {unix: ", path,
                  "}\ndatasets: {d: {path: $D}}\n"
                  "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n")),
              StartsWith("stoker.yaml:2:16: listen.unix: socket path '/run/"));
}

TEST_F(ConfigErrorTest, TcpAddressWithoutPortIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {tcp: localhost}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:2:15: listen.tcp: expected HOST:PORT like "
            "127.0.0.1:7411, got 'localhost' (no port)");
}

TEST_F(ConfigErrorTest, MetricsOnWithoutAddressIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
metrics: on
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:10: metrics: expected off or a map like {listen: "
            "127.0.0.1:9464}, got 'on'");
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

TEST_F(ConfigErrorTest, MissingDatasetDirectoryNamesThePathAndLine) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets:
  d: {path: $D}
  gone: {path: /nonexistent/stoker/data}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:5:16: datasets.gone.path: '/nonexistent/stoker/data' "
            "does not exist; expected a dataset directory written by "
            "`stoker pack`");
}

TEST_F(ConfigErrorTest, DatasetPathThatIsAFileIsRejected) {
  const std::string file = dir_.WriteFile("file", "x").string();
  EXPECT_EQ(
      Error(absl::StrCat(
          "\nlisten: {unix: s.sock}\ndatasets:\n"
          "  f:\n    path: ",
          file, "\npipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n")),
      absl::StrCat("stoker.yaml:5:11: datasets.f.path: '", file,
                   "' is not a directory; expected a dataset directory "
                   "written by `stoker pack`"));
}

TEST_F(ConfigErrorTest, RelativeDatasetPathErrorShowsTheResolvedPath) {
  const std::string file = (dir_.path() / "stoker.yaml").string();
  const std::string message = ErrorOf(LoadConfigString(
      "listen: {unix: s.sock}\ndatasets: {d: {path: missing}}\n"
      "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n",
      file));
  EXPECT_EQ(message,
            absl::StrCat(file,
                         ":2:22: datasets.d.path: 'missing' (resolved "
                         "to '",
                         (dir_.path() / "missing").string(),
                         "') does not exist; expected a dataset directory "
                         "written by `stoker pack`"));
}

TEST_F(ConfigErrorTest, BadDatasetNameIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets:
  "my data": {path: $D}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:4:3: dataset name 'my data' has characters not "
            "allowed; expected letters, digits, '_', '-' and '.', starting "
            "with a letter, digit or '_'");
}

TEST_F(ConfigErrorTest, UnknownOpInPipelineListsTheKnownOps) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
  - decode_jpeg: {}
  - random_crop: {size: 224}
)"),
              AllOf(StartsWith("stoker.yaml:7:5: unknown op 'random_crop' in "
                               "pipeline 'train'; expected one of: "),
                    HasSubstr("center_crop"), HasSubstr("decode_jpeg"),
                    HasSubstr("random_resized_crop")));
}

TEST_F(ConfigErrorTest, MisspelledOpSuggestsTheClosest) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpg
)"),
              StartsWith("stoker.yaml:6:7: unknown op 'decode_jpg' in pipeline "
                         "'train' (did you mean 'decode_jpeg'?); expected "
                         "one of: "));
}

TEST_F(ConfigErrorTest, ScalarWhereListExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - normalize: {mean: 0.5, std: [0.2, 0.2, 0.2]}
)"),
            "stoker.yaml:7:25: argument 'mean' of op 'normalize' in pipeline "
            "'train': expected a list of numbers like [0.5, 0.5, 0.5], got "
            "'0.5'");
}

TEST_F(ConfigErrorTest, NonNumberInFloatListPointsAtTheElement) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - normalize:
        mean: [0.5, 0.5, 0.5]
        std: [0.2, x, 0.2]
)"),
            "stoker.yaml:8:20: argument 'std' of op 'normalize' in pipeline "
            "'train': expected a list of numbers like [0.5, 0.5, 0.5], got "
            "'x'");
}

TEST_F(ConfigErrorTest, TextWhereIntegerExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - resize: {size: big}
)"),
            "stoker.yaml:6:22: argument 'size' of op 'resize' in pipeline "
            "'train': expected an integer or a pair [height, width], got "
            "'big'");
}

TEST_F(ConfigErrorTest, FloatWhereIntegerExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - center_crop: {size: [224, 22.5]}
)"),
            "stoker.yaml:6:33: argument 'size' of op 'center_crop' in "
            "pipeline 'train': expected an integer or a pair [height, width], "
            "got '22.5'");
}

TEST_F(ConfigErrorTest, PairWithThreeElementsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - resize: {size: [1, 2, 3]}
)"),
            "stoker.yaml:6:22: argument 'size' of op 'resize' in pipeline "
            "'train': expected an integer or a pair [height, width], got a "
            "list of 3");
}

TEST_F(ConfigErrorTest, MapWhereStringExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - layout: {value: chw}
    - normalize: {mean: [0], std: [1], dtype: {x: 1}}
)"),
            "stoker.yaml:7:47: argument 'dtype' of op 'normalize' in pipeline "
            "'train': expected a string, got a map");
}

TEST_F(ConfigErrorTest, MissingRequiredArgumentIsRejectedAtTheOp) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - resize: {}
)"),
            "stoker.yaml:7:7: op 'resize' in pipeline 'train' is missing "
            "required argument 'size'; expected an integer or a pair "
            "[height, width]");
}

TEST_F(ConfigErrorTest, UnknownArgumentSuggestsTheClosest) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - center_crop: {size: 224, szie: 3}
)"),
              StartsWith("stoker.yaml:6:32: unknown key 'szie' in arguments "
                         "of op 'center_crop' in pipeline 'train' (did you "
                         "mean 'size'?); expected one of: "));
}

TEST_F(ConfigErrorTest, ArgumentToOpWithoutArgumentsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg: {fast: true}
)"),
            "stoker.yaml:6:21: unknown key 'fast' in arguments of op "
            "'decode_jpeg' in pipeline 'train'; expected no keys");
}

TEST_F(ConfigErrorTest, ScalarValueForOpWithoutScalarArgumentIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - resize: 224
)"),
            "stoker.yaml:6:15: op 'resize' in pipeline 'train' is given '224'; "
            "expected a map of arguments like {size: ...}");
}

TEST_F(ConfigErrorTest, StepWithArgumentsAtTheWrongIndentIsExplained) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - random_resized_crop:
      size: 224
)"),
            "stoker.yaml:6:7: a step of pipeline 'train' has 2 keys "
            "(random_resized_crop, size); expected one key, the op name, with "
            "its arguments in a map under it");
}

TEST_F(ConfigErrorTest, PipelineThatIsNotAListIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train: {decode_jpeg: {}}
)"),
            "stoker.yaml:5:10: pipeline 'train' is a map; expected a list of "
            "ops like [decode_jpeg, center_crop: {size: 224}]");
}

TEST_F(ConfigErrorTest, PipelineWithoutOpsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train: []
)"),
            "stoker.yaml:5:10: pipeline 'train' has no ops; expected at least "
            "one");
}

TEST_F(ConfigErrorTest, PipelineRejectedByCreateIsPrefixedWithItsLine) {
  // Types are right, so the registry check passes; a negative size is for
  // the op itself to refuse.
  const std::string message = Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
  val:
    - decode_jpeg
    - resize: {size: -1}
)");
  EXPECT_THAT(message, StartsWith("stoker.yaml:8:3: pipeline 'val'"));
  EXPECT_THAT(message, HasSubstr("resize"));
  EXPECT_THAT(message, Not(HasSubstr("pipeline 'val': pipeline 'val'")));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
}

TEST_F(ConfigErrorTest, PipelineWithOpsOutOfOrderIsRejectedByCreate) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - center_crop: {size: 8}
    - decode_jpeg
)"),
              StartsWith("stoker.yaml:5:3: pipeline 'train'"));
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

TEST_F(ConfigErrorTest, PlaintextListenerBeyondLoopbackIsRejected) {
  for (const char* address :
       {"0.0.0.0:0", "10.1.2.3:7411", "[::]:0", "node7.example:7411"}) {
    EXPECT_EQ(Error(absl::StrCat(
                  "\nlisten: {tcp: \"", address, "\"}\n",
                  "datasets: {d: {path: $D}}\n"
                  "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n")),
              absl::StrCat(
                  "stoker.yaml:2:15: listen.tcp: ", address,
                  " is reachable beyond this node and has no TLS; set "
                  "listen.tls {cert, key} (and client_ca for client "
                  "certificates), listen on 127.0.0.1, or set "
                  "listen.insecure_remote: true to accept plaintext from the "
                  "network"));
  }
}

TEST_F(ConfigErrorTest, TlsWithoutKeyIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {tcp: 127.0.0.1:0, tls: {cert: server.pem}}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:2:33: listen.tls has no key; expected {cert: "
            "server.pem, key: server.key}");
}

TEST_F(ConfigErrorTest, TlsWithoutTcpIsRejected) {
  EXPECT_EQ(Error(R"(
listen:
  unix: s.sock
  tls: {cert: server.pem, key: server.key}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:4:3: listen.tls is set but listen.tcp is not; TLS "
            "applies to the TCP listener only (the unix socket is guarded by "
            "its mode and group)");
}

TEST_F(ConfigErrorTest, UnknownTlsKeyIsRejected) {
  EXPECT_THAT(Error(R"(
listen: {tcp: 127.0.0.1:0, tls: {cert: a.pem, key: a.key, ca: c.pem}}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
              HasSubstr("client_ca"));
}

TEST_F(ConfigErrorTest, InsecureRemoteMustBeABool) {
  EXPECT_EQ(Error(R"(
listen: {tcp: 127.0.0.1:0, insecure_remote: maybe}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:2:45: listen.insecure_remote: expected true or "
            "false, got 'maybe'");
}

}  // namespace
}  // namespace stoker::config
