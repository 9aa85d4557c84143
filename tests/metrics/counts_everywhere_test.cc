// Every per-stream count of server/service/counters.h (kCounts) reaches the
// four places that show it, with no edit but its entry there: GetStats'
// `counts` maps, Prometheus, `stoker top` (and its --json) and the close
// log; and docs/observability.md's metric table lists it. This test names
// no count: a new one is checked as it is added.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/cli/top_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/daemon_stats.h"
#include "server/metrics/prometheus_collector.h"
#include "server/metrics/stream_log.h"
#include "server/rpc/stats_convert.h"
#include "server/service/counters.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;

// A daemon with one open stream and its label set, every count nonzero.
metrics::DaemonStats WithEveryCount(double uptime, int64_t value) {
  metrics::DaemonStats stats;
  stats.uptime_seconds = uptime;
  service::StreamSnapshot stream;
  stream.id = 1;
  stream.spec.dataset = "train";
  stream.spec.pipeline = "aug";
  stream.spec.transport = "grpc";
  metrics::LabelStats labels;
  labels.key = {"train", "aug", "", "grpc"};
  for (const service::CountDef& def : service::kCounts) {
    stream.stats.counts[def.count] = value;
    labels.counts[def.count] = value;
  }
  stats.streams.push_back(stream);
  stats.labels.push_back(labels);
  return stats;
}

TEST(CountsEverywhereTest, EveryCountReachesGetStatsPrometheusTopAndTheLog) {
  const metrics::DaemonStats before = WithEveryCount(10, 1'000'000'000);
  const metrics::DaemonStats after = WithEveryCount(12, 3'000'000'000);
  v1::DaemonStats before_proto, after_proto;
  rpc::ToProto(before, &before_proto);
  rpc::ToProto(after, &after_proto);
  const std::string exposition = metrics::RenderExposition(after);
  const cli::TopView top = cli::BuildView(before_proto, after_proto);
  ASSERT_EQ(top.streams.size(), 1u);
  ASSERT_EQ(top.jobs.size(), 1u);
  const nlohmann::json top_json = cli::ToJson(top);

  ::testing::internal::CaptureStderr();
  metrics::StreamLog().OnClose(after.streams[0], absl::OkStatus(), 2);
  const std::string log = ::testing::internal::GetCapturedStderr();

  for (const service::CountDef& def : service::kCounts) {
    const std::string name = def.name;
    const double exported = 3e9 * def.unit;
    const double rate = (3e9 - 1e9) * def.unit / 2;
    ASSERT_EQ(after_proto.streams_size(), 1);
    EXPECT_EQ(after_proto.streams(0).counts().count(name), 1u) << name;
    EXPECT_NEAR(after_proto.streams(0).counts().at(name), exported,
                1e-9 * exported);
    ASSERT_EQ(after_proto.labels_size(), 1);
    EXPECT_NEAR(after_proto.labels(0).counts().at(name), exported,
                1e-9 * exported)
        << name;
    EXPECT_THAT(exposition, HasSubstr(absl::StrCat(def.metric, "{")))
        << name;
    EXPECT_EQ(top.streams[0].per_second.count(name), 1u) << name;
    EXPECT_NEAR(top.streams[0].per_second.at(name), rate, 1e-9 * rate)
        << name;
    EXPECT_NEAR(top.jobs[0].per_second.at(name), rate, 1e-9 * rate) << name;
    EXPECT_TRUE(top_json["streams"][0]["per_second"].contains(name)) << name;
    EXPECT_TRUE(top_json["jobs"][0]["per_second"].contains(name)) << name;
    EXPECT_THAT(log, HasSubstr(absl::StrCat(" ", name, "="))) << name;
  }
}

TEST(CountsEverywhereTest, TheMetricReferenceListsEveryCount) {
  std::ifstream in(STOKER_SOURCE_DIR "/docs/observability.md");
  ASSERT_TRUE(in.good());
  std::stringstream doc;
  doc << in.rdbuf();
  for (const service::CountDef& def : service::kCounts) {
    EXPECT_THAT(doc.str(), HasSubstr(absl::StrCat("| `", def.metric, "` |")))
        << def.metric;
  }
}

}  // namespace
}  // namespace stoker
