// An in-process stokerd for tests: a temp dir with a small packed dataset, a
// config, and a server listening on a unix socket inside the temp dir.
#ifndef STOKER_TESTS_TESTING_TEST_SERVER_H_
#define STOKER_TESTS_TESTING_TEST_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/server_lib.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::testing {

struct TestServerOptions {
  int num_samples = 50;
  int num_classes = 3;
  int shards = 2;
  int workers = 2;
  std::string on_corrupt = "skip";
  std::string memory_budget = "256MiB";
  uint32_t max_batch_size = 256;
  uint32_t max_streams_per_peer = 64;
  std::string max_batch_bytes = "1GiB";
  // Extra YAML appended to the config (e.g. more pipelines).
  std::string extra_yaml;
  // An existing dataset dir to serve instead of making one.
  std::string dataset_dir;
  // Listen on TCP 127.0.0.1:0 only, with no unix socket.
  bool tcp_only = false;
};

// Pipelines every test server has:
//   train: decode_jpeg, random_resized_crop 32, random_flip, normalize f32, chw
//   val:   decode_jpeg, resize 40, center_crop 32, normalize uint8 (hwc)
class TestServer {
 public:
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(
      const TestServerOptions& options);
  ~TestServer();

  const std::string& target() const { return target_; }
  const std::string& dataset_dir() const { return dataset_dir_; }
  const std::string& config_path() const { return config_path_; }
  StokerServer* server() { return server_.get(); }

 private:
  ScopedTempDir dir_;
  std::string dataset_dir_;
  std::string config_path_;
  std::string target_;
  std::unique_ptr<StokerServer> server_;
};

// A fixture whose tests each get a TestServer of the default options.
class TestServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TestServer::Start(TestServerOptions{});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  std::unique_ptr<TestServer> server_;
};

// The YAML of a test daemon config serving `dataset_dir` on `socket`.
std::string TestConfigYaml(const std::string& dataset_dir,
                           const std::string& socket,
                           const TestServerOptions& options);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_TEST_SERVER_H_
