#include "tests/testing/test_server.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "server/config/config_loader.h"

namespace stoker::testing {

std::string TestConfigYaml(const std::string& dataset_dir,
                           const std::string& socket,
                           const TestServerOptions& options) {
  return absl::StrCat(
      options.tcp_only ? "listen: {tcp: \"127.0.0.1:0\"}\n"
                       : absl::StrCat("listen: {unix: ", socket, "}\n"),
      "workers: ", options.workers, "\n",
      "memory_budget: ", options.memory_budget, "\n",
      "on_corrupt: ", options.on_corrupt, "\n",
      "limits: {max_batch_size: ", options.max_batch_size,
      ", max_streams_per_peer: ", options.max_streams_per_peer,
      ", max_batch_bytes: ", options.max_batch_bytes, "}\n",
      "datasets:\n",
      "  train: {path: ", dataset_dir, "}\n",
      "pipelines:\n",
      "  train:\n",
      "    - decode_jpeg: {}\n",
      "    - random_resized_crop: {size: 32}\n",
      "    - random_flip: {}\n",
      "    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, "
      "0.225], dtype: float32}\n",
      "    - layout: chw\n",
      "  val:\n",
      "    - decode_jpeg: {}\n",
      "    - resize: {size: 40}\n",
      "    - center_crop: {size: 32}\n",
      "    - normalize: {dtype: uint8}\n",
      options.extra_yaml);
}

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(
    const TestServerOptions& options) {
  StokerServer::KeepGrpcAlive();
  std::unique_ptr<TestServer> ts(new TestServer());
  if (options.dataset_dir.empty()) {
    absl::StatusOr<std::string> dir =
        MakeTestDataset(ts->dir_.path(), options.num_samples,
                        options.num_classes, options.shards, /*seed=*/1);
    if (!dir.ok()) return dir.status();
    ts->dataset_dir_ = *dir;
  } else {
    ts->dataset_dir_ = options.dataset_dir;
  }
  const std::string socket = ts->dir_.path() + "/stoker.sock";
  ts->config_path_ = ts->dir_.path() + "/stoker.yaml";
  std::ofstream(ts->config_path_)
      << TestConfigYaml(ts->dataset_dir_, socket, options);
  auto config = config::LoadConfigFile(ts->config_path_);
  if (!config.ok()) return config.status();
  auto server = StokerServer::Create(*config);
  if (!server.ok()) return server.status();
  ts->server_ = *std::move(server);
  if (absl::Status s = ts->server_->Start(); !s.ok()) return s;
  ts->target_ = options.tcp_only
                    ? absl::StrCat("127.0.0.1:", ts->server_->tcp_port())
                    : ts->server_->unix_target();
  return ts;
}

TestServer::~TestServer() {
  if (server_ != nullptr) server_->Stop();
}

}  // namespace stoker::testing
