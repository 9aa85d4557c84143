// Valid configs: what the loader produces from them.

#include "server/config/config_loader.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/registry.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using pipeline::ArgValue;
using ::stoker::config::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ConfigLoaderTest : public ::testing::Test {
 protected:
  // Loads `yaml` as if from a file in dir_, with $DIR replaced by dir_.
  absl::StatusOr<ServerOptions> Load(absl::string_view yaml) {
    const std::string text =
        absl::StrReplaceAll(yaml, {{"$DIR", dir_.path().string()}});
    return LoadConfigString(text, (dir_.path() / "stoker.yaml").string());
  }

  TempDir dir_;
};

TEST_F(ConfigLoaderTest, FullConfigRoundTripsIntoOptions) {
  dir_.MakeDir("data/train");
  dir_.MakeDir("data/val");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: $DIR/stoker.sock, tcp: 127.0.0.1:7411, unix_mode: "0640", unix_group: stoker}
workers: 12
memory_budget: 3GiB
on_corrupt: fail
limits: {max_batch_size: 1024, max_prefetch: 16, default_prefetch: 8, max_streams: 32, max_streams_per_peer: 8, max_batch_bytes: 256MiB}
metrics: {listen: 127.0.0.1:9464}
datasets:
  train: {path: $DIR/data/train}
  val: {path: $DIR/data/val}
pipelines:
  train:
    - decode_jpeg: {}
    - random_resized_crop: {size: 224, scale: [0.08, 1], ratio: [0.75, 1.25]}
    - random_flip: {p: 0.25}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float16}
    - layout: chw
  val:
    - decode_jpeg
    - resize: {size: [256, 320]}
    - center_crop: {size: 224}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const std::filesystem::path dir = dir_.path();
  EXPECT_EQ(options->source, (dir / "stoker.yaml").string());
  EXPECT_EQ(options->listen.unix_path, (dir / "stoker.sock").string());
  EXPECT_EQ(options->listen.tcp, "127.0.0.1:7411");
  EXPECT_EQ(options->listen.unix_mode, 0640u);
  EXPECT_EQ(options->listen.unix_group, "stoker");
  EXPECT_EQ(options->workers, 12);
  EXPECT_EQ(options->memory_budget, 3ull << 30);
  EXPECT_EQ(options->on_corrupt, OnCorrupt::kFail);
  EXPECT_EQ(options->limits.max_batch_size, 1024u);
  EXPECT_EQ(options->limits.max_prefetch, 16u);
  EXPECT_EQ(options->limits.default_prefetch, 8u);
  EXPECT_EQ(options->limits.max_streams, 32u);
  EXPECT_EQ(options->limits.max_streams_per_peer, 8u);
  EXPECT_EQ(options->limits.max_batch_bytes, 256ull << 20);
  EXPECT_TRUE(options->metrics.enabled);
  EXPECT_EQ(options->metrics.listen, "127.0.0.1:9464");

  ASSERT_EQ(options->datasets.size(), 2u);
  EXPECT_EQ(options->datasets[0].name, "train");
  EXPECT_EQ(options->datasets[0].path, (dir / "data/train").string());
  EXPECT_EQ(options->datasets[0].line, 9);
  EXPECT_EQ(options->datasets[1].name, "val");
  EXPECT_EQ(options->datasets[1].path, (dir / "data/val").string());
  EXPECT_EQ(options->datasets[1].line, 10);

  ASSERT_EQ(options->pipelines.size(), 2u);
  const PipelineOptions& train = options->pipelines[0];
  EXPECT_EQ(train.name, "train");
  EXPECT_EQ(train.line, 12);
  ASSERT_EQ(train.ops.size(), 5u);
  EXPECT_EQ(train.ops[0].name, "decode_jpeg");
  EXPECT_EQ(train.ops[0].line, 13);
  EXPECT_EQ(train.ops[1].name, "random_resized_crop");
  EXPECT_EQ(train.ops[1].line, 14);
  EXPECT_EQ(train.ops[1].args.at("size"), ArgValue(std::vector<double>{224}));
  EXPECT_EQ(train.ops[1].args.at("scale"),
            ArgValue(std::vector<double>{0.08, 1}));
  EXPECT_EQ(train.ops[1].args.at("ratio"),
            ArgValue(std::vector<double>{0.75, 1.25}));
  EXPECT_EQ(train.ops[2].name, "random_flip");
  EXPECT_EQ(train.ops[2].args.at("p"), ArgValue(0.25));
  EXPECT_EQ(train.ops[3].name, "normalize");
  EXPECT_EQ(train.ops[3].args.at("mean"),
            ArgValue(std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(train.ops[3].args.at("std"),
            ArgValue(std::vector<double>{0.229, 0.224, 0.225}));
  EXPECT_EQ(train.ops[3].args.at("dtype"), ArgValue(std::string("float16")));
  EXPECT_EQ(train.ops[4].name, "layout");
  EXPECT_EQ(train.ops[4].line, 17);
  const pipeline::OpDef* layout = pipeline::OpRegistry::Global().Find("layout");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(train.ops[4].args.at(layout->scalar_arg),
            ArgValue(std::string("chw")));

  const PipelineOptions& val = options->pipelines[1];
  EXPECT_EQ(val.name, "val");
  EXPECT_EQ(val.line, 18);
  ASSERT_EQ(val.ops.size(), 3u);
  EXPECT_EQ(val.ops[0].name, "decode_jpeg");
  EXPECT_EQ(val.ops[1].args.at("size"),
            ArgValue(std::vector<double>{256, 320}));
  EXPECT_EQ(val.ops[2].args.at("size"), ArgValue(std::vector<double>{224}));
}

TEST_F(ConfigLoaderTest, MinimalConfigGetsTheDefaults) {
  dir_.MakeDir("train");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {tcp: "[::1]:0"}
datasets: {train: {path: train}}
pipelines: {raw: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const ServerOptions defaults;
  EXPECT_EQ(options->listen.tcp, "[::1]:0");
  EXPECT_EQ(options->listen.unix_path, "");
  EXPECT_EQ(options->listen.unix_mode, 0660u);
  EXPECT_EQ(options->workers, 0);
  EXPECT_EQ(options->memory_budget, 2ull << 30);
  EXPECT_EQ(options->device_memory_budget, 2ull << 30);
  EXPECT_EQ(options->on_corrupt, OnCorrupt::kSkip);
  EXPECT_EQ(options->limits.max_batch_size, defaults.limits.max_batch_size);
  EXPECT_EQ(options->limits.max_batch_bytes, defaults.limits.max_batch_bytes);
  EXPECT_FALSE(options->metrics.enabled);
}

TEST_F(ConfigLoaderTest, DeviceMemoryBudgetIsASizePerGpu) {
  dir_.MakeDir("train");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {tcp: "[::1]:0"}
device_memory_budget: 6GiB
datasets: {train: {path: train}}
pipelines: {raw: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->device_memory_budget, 6ull << 30);
}

TEST_F(ConfigLoaderTest, HelpersAreReadInOrderWithTheirPolicy) {
  dir_.MakeDir("train");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: s.sock}
helpers:
  addresses: [10.0.0.2:7411, "[fd00::3]:7411"]
  placement: remote_first
  chunk_steps: 3
  streams: 2
  stall_seconds: 1.5
  saturated_ms: 50
  idle_ms: 2000
  stall_share: 0.1
  raw: false
  compress: zstd
  tls: {ca: tls/ca.pem, cert: /etc/me.pem, key: me.key, server_name: helper}
datasets: {train: {path: train}}
pipelines: {raw: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const HelperOptions& h = options->helpers;
  EXPECT_THAT(h.addresses, ElementsAre("10.0.0.2:7411", "[fd00::3]:7411"));
  EXPECT_EQ(h.placement, HelperOptions::Placement::kRemoteFirst);
  EXPECT_EQ(h.chunk_steps, 3u);
  EXPECT_EQ(h.streams, 2u);
  EXPECT_DOUBLE_EQ(h.stall_seconds, 1.5);
  EXPECT_DOUBLE_EQ(h.saturated_ms, 50);
  EXPECT_DOUBLE_EQ(h.idle_ms, 2000);
  EXPECT_DOUBLE_EQ(h.stall_share, 0.1);
  EXPECT_FALSE(h.raw);
  EXPECT_EQ(h.compress, HelperOptions::Compress::kZstd);
  EXPECT_TRUE(h.tls);
  // Relative to the config file's directory.
  EXPECT_EQ(h.tls_ca, (dir_.path() / "tls/ca.pem").string());
  EXPECT_EQ(h.tls_cert, "/etc/me.pem");
  EXPECT_EQ(h.tls_key, (dir_.path() / "me.key").string());
  EXPECT_EQ(h.tls_server_name, "helper");
}

TEST_F(ConfigLoaderTest,
       HelpersDefaultToChunksOfTwoRawAutoCompressionAndPlaintextOnLoopback) {
  dir_.MakeDir("train");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.1:7411, "localhost:7412"]}
datasets: {train: {path: train}}
pipelines: {raw: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const HelperOptions& h = options->helpers;
  EXPECT_EQ(h.placement, HelperOptions::Placement::kLocalFirst);
  EXPECT_EQ(h.chunk_steps, 2u);  // The length measured best.
  EXPECT_EQ(h.streams, 4u);
  EXPECT_TRUE(h.raw);
  EXPECT_EQ(h.compress, HelperOptions::Compress::kAuto);
  EXPECT_FALSE(h.tls);
  EXPECT_FALSE(h.insecure);
}

TEST_F(ConfigLoaderTest, ADatasetWithASourceNeedNotExistAndStorageIsRead) {
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: $DIR/s.sock}
storage:
  cache_limit: 2GiB
  parallel: 4
  chunk_size: 8MiB
  piece_size: 1MiB
  read_parallel: 64
  read_ahead: 0
  read_block: 1MiB
  read_cache: 256MiB
  retries: 1
  s3: {region: eu-west-1, endpoint: "http://127.0.0.1:9000", profile: ci,
       credentials_file: creds}
datasets:
  train: {path: staged/train, source: "s3://bucket/packs/train"}
  mount: {path: staged/mount, source: ../nfs/train}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_EQ(options->datasets.size(), 2u);
  EXPECT_EQ(options->datasets[0].source, "s3://bucket/packs/train");
  EXPECT_EQ(options->datasets[0].path, (dir_.path() / "staged/train").string());
  EXPECT_EQ(options->datasets[1].source,
            (dir_.path().parent_path() / "nfs/train").string());
  const StorageOptions& s = options->storage;
  EXPECT_EQ(s.cache_limit, uint64_t{2} << 30);
  EXPECT_EQ(s.parallel, 4u);
  EXPECT_EQ(s.chunk_size, uint64_t{8} << 20);
  EXPECT_EQ(s.piece_size, uint64_t{1} << 20);
  EXPECT_EQ(s.read_parallel, 64u);
  EXPECT_EQ(s.read_ahead, 0u);
  EXPECT_EQ(s.read_block, uint64_t{1} << 20);
  EXPECT_EQ(s.read_cache, uint64_t{256} << 20);
  EXPECT_EQ(s.retries, 1u);
  EXPECT_EQ(s.s3_region, "eu-west-1");
  EXPECT_EQ(s.s3_endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(s.s3_profile, "ci");
  EXPECT_EQ(s.s3_credentials_file, (dir_.path() / "creds").string());
}

TEST_F(ConfigLoaderTest, StorageMistakesAreNamed) {
  const absl::Status s = Load(R"(
listen: {unix: $DIR/s.sock}
storage: {parallel: 0, chunk_size: 1KiB, read_parallel: 2.5, read_ahead: 65,
          read_block: 1KiB, read_cache: 1KiB, retries: 21,
          s3: {endpoint: minio:9000, secret: x}}
datasets: {train: {path: $DIR/missing}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)")
                             .status();
  EXPECT_THAT(s.message(), HasSubstr("storage.parallel"));
  EXPECT_THAT(s.message(), HasSubstr("storage.chunk_size: 1024 bytes is "
                                     "outside 64KiB to 1GiB"));
  EXPECT_THAT(s.message(),
              HasSubstr("storage.read_parallel: expected a whole number "
                        "from 1 to 256, got 2.5"));
  EXPECT_THAT(s.message(), HasSubstr("storage.read_ahead"));
  EXPECT_THAT(s.message(), HasSubstr("read_block: 1024 bytes is outside 0"));
  EXPECT_THAT(s.message(), HasSubstr("storage.read_cache: 1024 bytes is "
                                     "outside 1MiB to 1TiB"));
  EXPECT_THAT(s.message(), HasSubstr("storage.retries"));
  EXPECT_THAT(s.message(), HasSubstr("storage.s3.endpoint: 'minio:9000' is "
                                     "not an http:// or https:// URL"));
  EXPECT_THAT(s.message(), HasSubstr("secret"));
  // Without a source, a missing path is still a mistake.
  EXPECT_THAT(s.message(), HasSubstr("does not exist"));
}

TEST_F(ConfigLoaderTest, RelativeDatasetPathResolvesAgainstConfigDirectory) {
  dir_.MakeDir("conf/shards/train");
  const std::filesystem::path file = dir_.WriteFile("conf/stoker.yaml", R"(
listen: {unix: run/stoker.sock}
datasets:
  train: {path: ./shards/../shards/train}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)");
  // The working directory must not matter.
  const std::filesystem::path old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.MakeDir("elsewhere"));
  const absl::StatusOr<ServerOptions> options = LoadConfigFile(file.string());
  std::filesystem::current_path(old_cwd);

  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_EQ(options->datasets.size(), 1u);
  EXPECT_EQ(options->datasets[0].path,
            (dir_.path() / "conf/shards/train").string());
  EXPECT_EQ(options->listen.unix_path,
            (dir_.path() / "conf/run/stoker.sock").string());
  EXPECT_EQ(options->source, file.string());
}

TEST_F(ConfigLoaderTest, RelativeConfigPathResolvesAgainstWorkingDirectory) {
  dir_.MakeDir("data");
  dir_.WriteFile("stoker.yaml",
                 "listen: {unix: s.sock}\ndatasets: {d: {path: data}}\n"
                 "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n");
  const std::filesystem::path old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  const absl::StatusOr<ServerOptions> options = LoadConfigFile("stoker.yaml");
  std::filesystem::current_path(old_cwd);

  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "stoker.yaml");
  EXPECT_EQ(options->datasets[0].path, (dir_.path() / "data").string());
}

TEST_F(ConfigLoaderTest, OptionalOpArgumentsLeftOutAreNotFilledIn) {
  // Pipeline::Create fills defaults; the options hold what the file says.
  dir_.MakeDir("d");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: s.sock}
datasets: {d: {path: d}}
pipelines:
  p:
    - decode_jpeg
    - random_resized_crop: {size: 128}
    - random_flip:
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const auto& ops = options->pipelines[0].ops;
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_TRUE(ops[0].args.empty());
  EXPECT_EQ(ops[1].args.size(), 1u);
  EXPECT_EQ(ops[1].args.at("size"), ArgValue(std::vector<double>{128}));
  EXPECT_TRUE(ops[2].args.empty());
}

TEST_F(ConfigLoaderTest, APipelineWithViewsKeepsItsDecodeListAndViews) {
  dir_.MakeDir("data");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: $DIR/stoker.sock}
datasets: {d: {path: $DIR/data}}
pipelines:
  dino:
    decode: [decode_image]
    views:
      global: {count: 2, ops: [{random_resized_crop: {size: 224}}]}
      local: [{random_resized_crop: {size: 96}}, random_flip]
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const PipelineOptions& dino = options->pipelines[0];
  ASSERT_EQ(dino.ops.size(), 1u);
  EXPECT_EQ(dino.ops[0].name, "decode_image");
  ASSERT_EQ(dino.views.size(), 2u);
  EXPECT_EQ(dino.views[0].name, "global");
  EXPECT_EQ(dino.views[0].count, 2);
  EXPECT_EQ(dino.views[0].line, 8);
  ASSERT_EQ(dino.views[0].ops.size(), 1u);
  EXPECT_EQ(dino.views[0].ops[0].line, 8);
  EXPECT_EQ(dino.views[1].name, "local");
  EXPECT_EQ(dino.views[1].count, 1);
  ASSERT_EQ(dino.views[1].ops.size(), 2u);
  EXPECT_EQ(dino.views[1].ops[1].name, "random_flip");
}

TEST_F(ConfigLoaderTest, IntegersAreAcceptedWhereNumbersAreExpected) {
  dir_.MakeDir("d");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {unix: s.sock}
datasets: {d: {path: d}}
pipelines:
  p:
    - decode_jpeg
    - center_crop: {size: 8}
    - random_flip: {p: 1}
    - normalize: {mean: [0, 1, 2], std: [1, 1, 1]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const auto& ops = options->pipelines[0].ops;
  EXPECT_EQ(ops[2].args.at("p"), ArgValue(1.0));
  EXPECT_EQ(ops[3].args.at("mean"), ArgValue(std::vector<double>{0, 1, 2}));
}

TEST_F(ConfigLoaderTest, MetricsOffLeavesMetricsDisabled) {
  dir_.MakeDir("d");
  for (const char* off : {"off", "false", "no"}) {
    const absl::StatusOr<ServerOptions> options = Load(absl::StrCat(
        "listen: {unix: s.sock}\ndatasets: {d: {path: d}}\n",
        "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\nmetrics: ", off,
        "\n"));
    ASSERT_TRUE(options.ok()) << off << ": " << options.status();
    EXPECT_FALSE(options->metrics.enabled) << off;
    EXPECT_EQ(options->metrics.listen, "") << off;
  }
}

TEST_F(ConfigLoaderTest, UnixModeIsOctalWhetherQuotedOrNot) {
  dir_.MakeDir("d");
  for (const char* mode : {"\"0600\"", "0600", "600"}) {
    const absl::StatusOr<ServerOptions> options =
        Load(absl::StrCat("listen: {unix: s.sock, unix_mode: ", mode,
                          "}\ndatasets: {d: {path: d}}\npipelines: {p: "
                          "[decode_jpeg, center_crop: {size: 8}]}\n"));
    ASSERT_TRUE(options.ok()) << mode << ": " << options.status();
    EXPECT_EQ(options->listen.unix_mode, 0600u) << mode;
  }
}

TEST_F(ConfigLoaderTest, WorkersAutoMeansZero) {
  dir_.MakeDir("d");
  const absl::StatusOr<ServerOptions> options = Load(
      "listen: {unix: s.sock}\nworkers: auto\ndatasets: {d: {path: d}}\n"
      "pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}\n");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->workers, 0);
}

TEST(LoadConfigFileTest, MissingFileIsNotFoundAndNamesThePath) {
  const absl::StatusOr<ServerOptions> options =
      LoadConfigFile("/nonexistent/stoker.yaml");
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(options.status().message(),
              HasSubstr("'/nonexistent/stoker.yaml'"));
}

TEST(LoadConfigFileTest, DirectoryIsNotAConfigFile) {
  TempDir dir;
  const absl::StatusOr<ServerOptions> options =
      LoadConfigFile(dir.path().string());
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr(dir.path().string()));
}

TEST_F(ConfigLoaderTest, TlsPathsResolveAgainstTheConfigDirectory) {
  dir_.MakeDir("data");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen:
  tcp: 0.0.0.0:7411
  tls: {cert: tls/server.pem, key: /etc/stoker/server.key, client_ca: ca.pem}
datasets: {d: {path: data}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  const std::filesystem::path dir = dir_.path();
  EXPECT_EQ(options->listen.tls_cert, (dir / "tls/server.pem").string());
  EXPECT_EQ(options->listen.tls_key, "/etc/stoker/server.key");
  EXPECT_EQ(options->listen.tls_client_ca, (dir / "ca.pem").string());
  EXPECT_FALSE(options->listen.insecure_remote);
}

TEST_F(ConfigLoaderTest, InsecureRemoteAllowsAPlaintextWildcardListener) {
  dir_.MakeDir("data");
  const absl::StatusOr<ServerOptions> options = Load(R"(
listen: {tcp: "[::]:0", insecure_remote: true}
datasets: {d: {path: data}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->listen.insecure_remote);
  EXPECT_TRUE(options->listen.tls_cert.empty());
}

TEST_F(ConfigLoaderTest, LoopbackListenersNeedNoTls) {
  dir_.MakeDir("data");
  for (const char* address :
       {"127.0.0.1:0", "127.8.9.10:7411", "localhost:7411", "[::1]:0",
        "[::ffff:127.0.0.1]:0"}) {
    const absl::StatusOr<ServerOptions> options =
        Load(absl::StrCat("listen: {tcp: \"", address,
                          "\"}\ndatasets: {d: {path: data}}\npipelines: {p: "
                          "[decode_jpeg, center_crop: {size: 8}]}\n"));
    EXPECT_TRUE(options.ok()) << address << ": " << options.status();
  }
}

}  // namespace
}  // namespace stoker::config
