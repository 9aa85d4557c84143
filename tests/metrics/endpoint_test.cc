// stokerd's /metrics endpoint and GetStats call against an in-process
// daemon, after scripted streams.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "server/service/counters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/metrics/stream_log.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.pb.h"
#include "tests/metrics/exposition.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using metrics::Value;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr char kJ1[] =
    R"(dataset="train",pipeline="train",job_id="j1",transport="grpc")";

// GET http://127.0.0.1:port/path; the body, or "" on any failure.
std::string HttpGet(int port, const std::string& path = "/metrics") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[8192];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
    response.append(buf, n);
  close(fd);
  if (response.rfind("HTTP/1.1 200", 0) != 0 &&
      response.rfind("HTTP/1.0 200", 0) != 0) {
    return "";
  }
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

testing::TestServerOptions WithMetrics() {
  testing::TestServerOptions o;
  o.extra_yaml = "metrics: {listen: 127.0.0.1:0}\n";
  return o;
}

StreamOptions Train(const std::string& job, uint32_t batch_size) {
  StreamOptions o;
  o.dataset = "train";
  o.pipeline = "train";
  o.batch_size = batch_size;
  o.job_id = job;
  return o;
}

// Scrapes until `done` holds for the exposition, or 10 s pass.
std::string ScrapeUntil(int port,
                        const std::function<bool(const std::string&)>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string text = HttpGet(port);
  while (!done(text) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    text = HttpGet(port);
  }
  return text;
}

TEST(MetricsEndpointTest, ServesTheCountersOfAScriptedStream) {
  auto server = testing::TestServer::Start(WithMetrics());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->server()->metrics_port();
  ASSERT_GT(port, 0);
  auto client = Client::Connect((*server)->target());
  {
    auto stream = client->OpenStream(Train("j1", 8));
    ASSERT_TRUE(stream.ok()) << stream.status();
    Batch batch;
    while ((*stream)->Next(&batch).ok()) {
    }
  }
  StreamOptions missing = Train("j1", 8);
  missing.dataset = "missing";
  EXPECT_FALSE(client->OpenStream(missing).ok());

  // The stream's reservation goes with its last buffer, a moment after;
  // the pool counts a task once it has returned, which may be after the
  // batch it finished was delivered (49 seen on a loaded machine).
  const std::string text = ScrapeUntil(port, [](const std::string& t) {
    return Value(t, "stoker_streams_open", kJ1) == 0 &&
           Value(t, "stoker_errors_total", R"(code="NOT_FOUND")") == 1 &&
           Value(t, "stoker_worker_tasks_total", "") == 50;
  });
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(Value(text, "stoker_samples_total", kJ1), 50);
  EXPECT_EQ(Value(text, "stoker_batches_total", kJ1), 7);
  EXPECT_EQ(Value(text, "stoker_acks_total", kJ1), 7);
  EXPECT_EQ(Value(text, "stoker_corrupt_samples_total", kJ1), 0);
  EXPECT_GT(Value(text, "stoker_bytes_total", kJ1), 50 * 3 * 32 * 32 * 4 - 1);
  EXPECT_GT(Value(text, "stoker_consumer_wait_seconds_total", kJ1), 0);
  for (const char* stage : {"read", "decode", "augment", "collate"}) {
    EXPECT_EQ(Value(text, "stoker_stage_seconds_count",
                    std::string(kJ1) + ",stage=\"" + stage + "\""),
              50)
        << stage;
  }
  EXPECT_EQ(Value(text, "stoker_stage_seconds_count",
                  std::string(kJ1) + R"(,stage="transfer")"),
            7);
  EXPECT_EQ(Value(text, "stoker_stage_seconds_bucket",
                  std::string(kJ1) + R"(,stage="decode",le="+Inf")"),
            50);
  EXPECT_EQ(Value(text, "stoker_streams_open", kJ1), 0);
  EXPECT_EQ(Value(text, "stoker_jobs_open", ""), 0);
  EXPECT_EQ(Value(text, "stoker_errors_total", R"(code="NOT_FOUND")"), 1);
  EXPECT_EQ(Value(text, "stoker_worker_threads", ""), 2);
  EXPECT_EQ(Value(text, "stoker_worker_tasks_total", ""), 50);
  EXPECT_GT(Value(text, "stoker_worker_busy_seconds_total", ""), 0);
  EXPECT_EQ(Value(text, "stoker_memory_reserved_bytes", ""), 0);
  EXPECT_EQ(Value(text, "stoker_memory_budget_bytes", ""), 256 << 20);
  EXPECT_THAT(text, HasSubstr("stoker_dataset_storage_info{dataset=\"train\""));
  EXPECT_GT(Value(text, "stoker_start_time_seconds", ""), 1.6e9);
}

TEST(MetricsEndpointTest, OffUnlessConfigured) {
  auto server = testing::TestServer::Start(testing::TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->server()->metrics_port(), 0);
}

TEST(MetricsEndpointTest, AnAddressInUseFailsStartNamingIt) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  testing::TestServerOptions o;
  o.extra_yaml =
      "metrics: {listen: 127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) +
      "}\n";
  auto server = testing::TestServer::Start(o);
  close(fd);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(server.status().message(), HasSubstr("metrics.listen"));
}

TEST(GetStatsTest, ShowsAnOpenStreamItsJobAndTheDaemon) {
  auto server = testing::TestServer::Start(testing::TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect((*server)->target());
  StreamOptions o = Train("j2", 4);
  o.rank = 1;
  o.world_size = 2;
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Batch batch;
  ASSERT_TRUE((*stream)->Next(&batch).ok());
  ASSERT_TRUE((*stream)->Next(&batch).ok());

  v1::DaemonStats stats;
  ASSERT_TRUE(client->GetStats(&stats).ok());
  EXPECT_GT(stats.uptime_seconds(), 0);
  EXPECT_EQ(stats.open_streams(), 1u);
  ASSERT_EQ(stats.streams_size(), 1);
  const v1::StreamStats& s = stats.streams(0);
  EXPECT_GT(s.id(), 0u);
  EXPECT_EQ(s.dataset(), "train");
  EXPECT_EQ(s.pipeline(), "train");
  EXPECT_EQ(s.job_id(), "j2");
  EXPECT_EQ(s.transport(), "grpc");
  EXPECT_EQ(s.rank(), 1u);
  EXPECT_EQ(s.world_size(), 2u);
  EXPECT_EQ(s.batch_size(), 4u);
  EXPECT_EQ(s.prefetch(), 4u);
  EXPECT_GE(s.samples(), 8u);
  EXPECT_LE(s.acks(), s.batches());
  EXPECT_LE(s.queued() + s.building(), s.prefetch());
  // Every count of counters.h is in the map, the fixed fields agree.
  for (const service::CountDef& def : service::kCounts) {
    EXPECT_EQ(s.counts().count(def.name), 1u) << def.name;
    EXPECT_EQ(stats.labels(0).counts().count(def.name), 1u) << def.name;
  }
  EXPECT_EQ(s.counts().at("samples"), s.samples());
  EXPECT_EQ(s.counts().at("batches"), s.batches());
  ASSERT_EQ(stats.labels_size(), 1);
  const v1::LabelStats& l = stats.labels(0);
  EXPECT_EQ(l.job_id(), "j2");
  EXPECT_GE(l.samples(), 8u);
  ASSERT_EQ(l.stages_size(), 5);
  EXPECT_EQ(l.stages(0).stage(), "read");
  EXPECT_EQ(l.stages(4).stage(), "transfer");
  EXPECT_EQ(l.stages(1).bucket_counts_size(), 18);
  EXPECT_GE(l.stages(1).count(), 8u);
  EXPECT_EQ(stats.latency_bounds_seconds_size(), 17);
  EXPECT_EQ(stats.pool().threads(), 2u);
  EXPECT_EQ(stats.memory().budget_bytes(), 256u << 20);
  EXPECT_GT(stats.memory().reserved_bytes(), 0u);
  ASSERT_EQ(stats.storage_size(), 1);
  EXPECT_EQ(stats.storage(0).dataset(), "train");
  EXPECT_NE(stats.storage(0).kind(), "network");
  EXPECT_EQ(stats.errors_size(), 0);
}

TEST(GetStatsTest, InjectedNetworkStorageReachesMetricsAndStats) {
  StokerServer::KeepGrpcAlive();
  testing::ScopedTempDir dir;
  auto dataset = testing::MakeTestDataset(dir.path(), 6, 2, 1, /*seed=*/3);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const std::string config_path = dir.path() + "/stoker.yaml";
  std::ofstream(config_path) << testing::TestConfigYaml(
      *dataset, dir.path() + "/stoker.sock", WithMetrics());
  auto config = config::LoadConfigFile(config_path);
  ASSERT_TRUE(config.ok()) << config.status();
  metrics::StorageProbeOptions probe;
  probe.fs_type = 0x6969;  // NFS.
  auto server = StokerServer::Create(*config, probe);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());

  const std::string text = HttpGet((*server)->metrics_port());
  EXPECT_EQ(Value(text, "stoker_dataset_storage_info",
                  R"(dataset="train",fstype="nfs",kind="network")"),
            1);
  auto client = Client::Connect((*server)->unix_target());
  v1::DaemonStats stats;
  ASSERT_TRUE(client->GetStats(&stats).ok());
  ASSERT_EQ(stats.storage_size(), 1);
  EXPECT_EQ(stats.storage(0).kind(), "network");
  EXPECT_EQ(stats.storage(0).fstype(), "nfs");
  EXPECT_THAT(stats.storage(0).advice(), HasSubstr("local SSD"));
  (*server)->Stop();
}

// Records what the service reports of its streams.
class Recorder : public service::StreamObserver {
 public:
  void OnOpen(const service::StreamSnapshot& s, uint64_t reserved,
              std::string_view) override {
    absl::MutexLock lock(&mu_);
    opened_ = s;
    reserved_ = reserved;
  }
  void OnClose(const service::StreamSnapshot& s, const absl::Status& status,
               double seconds) override {
    absl::MutexLock lock(&mu_);
    closed_ = s;
    status_ = status;
    seconds_ = seconds;
  }
  bool WaitClosed() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::optional<service::StreamSnapshot>* c) {
              return c->has_value();
            },
            &closed_),
        absl::Seconds(10));
  }

  absl::Mutex mu_;
  std::optional<service::StreamSnapshot> opened_ ABSL_GUARDED_BY(mu_);
  std::optional<service::StreamSnapshot> closed_ ABSL_GUARDED_BY(mu_);
  uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  double seconds_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(StreamObserverTest, ReportsOpenAndCloseOnceWithFinalCounts) {
  Recorder recorder;  // Outlives the server and its streams.
  auto server = testing::TestServer::Start(testing::TestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->server()->stream_service()->SetObserver(&recorder);
  auto client = Client::Connect((*server)->target());
  {
    auto stream = client->OpenStream(Train("j3", 8));
    ASSERT_TRUE(stream.ok()) << stream.status();
    Batch batch;
    while ((*stream)->Next(&batch).ok()) {
    }
  }
  ASSERT_TRUE(recorder.WaitClosed());
  absl::MutexLock lock(&recorder.mu_);
  ASSERT_TRUE(recorder.opened_.has_value());
  EXPECT_EQ(recorder.opened_->id, recorder.closed_->id);
  EXPECT_EQ(recorder.opened_->spec.job_id, "j3");
  using service::Count;
  EXPECT_EQ(recorder.opened_->stats.counts[Count::kSamples], 0);
  EXPECT_GT(recorder.reserved_, 0u);
  EXPECT_EQ(recorder.closed_->stats.counts[Count::kSamples], 50);
  EXPECT_EQ(recorder.closed_->stats.counts[Count::kBatches], 7);
  EXPECT_EQ(recorder.closed_->stats.counts[Count::kAcks], 7);
  EXPECT_TRUE(recorder.status_.ok()) << recorder.status_;
  EXPECT_GT(recorder.seconds_, 0);
}

TEST(StreamLogTest, WritesOneLineAtOpenAndOneAtClose) {
  service::StreamSnapshot s;
  s.id = 5;
  s.spec.dataset = "train";
  s.spec.pipeline = "aug";
  s.spec.job_id = "j";
  s.spec.rank = 1;
  s.spec.world_size = 4;
  s.spec.batch_size = 64;
  s.spec.prefetch = 4;
  metrics::StreamLog log;
  ::testing::internal::CaptureStderr();
  log.OnOpen(s, 1024, "");
  using service::Count;
  s.stats.counts[Count::kSamples] = 640;
  s.stats.counts[Count::kBatches] = 10;
  s.stats.counts[Count::kWaitNs] = 1'000'000'000;
  s.stats.counts[Count::kBusyNs] = 3'000'000'000;
  log.OnClose(s, absl::DataLossError("bad record"), 1.5);
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr("level=info event=stream_open stream=5 "
                             "dataset=train pipeline=aug job=j rank=1/4 "
                             "transport=grpc batch_size=64 prefetch=4 "
                             "reserved_bytes=1024 start=0:0\n"));
  EXPECT_THAT(out, HasSubstr("level=warning event=stream_error stream=5 "
                             "dataset=train status=DATA_LOSS "
                             "error=\"bad record\"\n"));
  EXPECT_THAT(out, HasSubstr("level=warning event=stream_close stream=5 "));
  EXPECT_THAT(out, HasSubstr("status=DATA_LOSS samples=640 batches=10 "
                             "bytes=0 skipped=0 shared_batches=0 acks=0 "
                             "wait_seconds=1.000 busy_seconds=3.000 "
                             "remote_batches=0 "));
  // Every other count of kCounts follows, then the stream's own figures
  // end the line: a count added to kCounts needs no edit here.
  EXPECT_THAT(out, HasSubstr(" seconds=1.500 stall_share=0.250\n"));
}

TEST(StreamLogTest, ACancelledStreamIsLoggedAsCancelledWithTheReason) {
  service::StreamSnapshot s;
  s.id = 6;
  s.spec.dataset = "train";
  metrics::StreamLog log;
  ::testing::internal::CaptureStderr();
  log.OnClose(s, absl::CancelledError("the client left"), 0.5);
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr("level=info event=stream_cancelled stream=6 "
                             "dataset=train reason=\"the client left\"\n"));
  EXPECT_THAT(out, HasSubstr("level=info event=stream_close stream=6 "));
  EXPECT_THAT(out, HasSubstr(" status=CANCELLED "));
  EXPECT_THAT(out, Not(HasSubstr("stream_error")));
}

TEST(StreamLogTest, SlowStorageIsAWarningWithTheRemedy) {
  ::testing::internal::CaptureStderr();
  metrics::LogStorage("train", "/mnt/nfs/train",
                      {"nfs4", metrics::StorageKind::kNetwork, "",
                       "copy it to the node's local SSD"});
  metrics::LogStorage("val", "/ssd/val",
                      {"ext4", metrics::StorageKind::kLocal, "259:1", ""});
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr("level=warning event=slow_storage dataset=train "
                             "path=/mnt/nfs/train fstype=nfs4 kind=network"));
  EXPECT_THAT(out, HasSubstr("advice=\"copy it to the node's local SSD\""));
  EXPECT_THAT(out, HasSubstr("level=info event=dataset_storage dataset=val "
                             "path=/ssd/val fstype=ext4 kind=local "
                             "device=259:1"));
}

}  // namespace
}  // namespace stoker
