// Invalid configs, their values: sizes, limits, workers, listeners, TLS,
// metrics and dataset paths. Each is rejected with InvalidArgument and a
// message "stoker.yaml:LINE:COL: what was wrong; what was expected".

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::stoker::config::testing::ConfigErrorTest;
using ::stoker::config::testing::ErrorOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(ConfigErrorTest, BadByteSizeNamesTheKeyAndTheValue) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
memory_budget: lots
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:16: memory_budget: expected a size like 2GiB, got "
            "'lots'");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
device_memory_budget: 2 GPUs
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:23: device_memory_budget: expected a size like "
            "2GiB, got '2 GPUs'");
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

TEST_F(ConfigErrorTest, HelperMistakesNameTheItem) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.2:7411, nowhere]}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:39: helpers.addresses[1]: expected HOST:PORT like "
            "127.0.0.1:7411, got 'nowhere' (no port)");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.2:7411, 127.0.0.2:7411]}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:39: helpers.addresses[1]: 127.0.0.2:7411 is listed "
            "twice");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.2:7411], placement: nearest}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:51: helpers.placement: expected local_first or "
            "remote_first, got nearest");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {dns: helpers.example}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:16: helpers.dns: expected HOST:PORT like "
            "127.0.0.1:7411, got 'helpers.example' (no port)");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {dns: 'helpers.example:7411', dns_refresh_seconds: 0, insecure: true}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:61: helpers.dns_refresh_seconds: expected a number "
            "of seconds from 1 to 3600, got '0'");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.2:7411], compress: lz4, raw: maybe}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:50: helpers.compress: expected auto, zstd or none, "
            "got lz4\n"
            "stoker.yaml:3:60: helpers.raw: expected true or false, got "
            "'maybe'");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.2:7411], tls: {ca: ca.pem, cert: me.pem}}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:45: helpers.tls: a client certificate needs its key "
            "and the key its certificate (cert and key, or neither)");
}

TEST_F(ConfigErrorTest, PlaintextToAHelperBeyondLoopbackIsRefused) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {addresses: [127.0.0.2:7411, 10.0.0.2:7411, "[::1]:7411"]}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:1: helpers: 10.0.0.2:7411 is beyond loopback: set "
            "helpers.tls {ca: FILE} (the helpers' listen.tls), or "
            "helpers.insecure: true for plaintext on a trusted network");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
helpers: {dns: 'helpers.example:7411'}
datasets: {d: {path: $D}}
pipelines: {p: [decode_jpeg, center_crop: {size: 8}]}
)"),
            "stoker.yaml:3:1: helpers: helpers.example:7411 is beyond "
            "loopback: set helpers.tls {ca: FILE} (the helpers' listen.tls), "
            "or helpers.insecure: true for plaintext on a trusted network");
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
