// The exposition rendered from synthetic snapshots: names, types, labels,
// cumulative buckets.
#include "server/metrics/prometheus_collector.h"

#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition.h"

namespace stoker::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

service::StreamSnapshot OpenStream(uint64_t id, const std::string& job,
                                   int queued, int building) {
  service::StreamSnapshot s;
  s.id = id;
  s.spec.dataset = "train";
  s.spec.pipeline = "aug";
  s.spec.job_id = job;
  s.stats.queued = queued;
  s.stats.building = building;
  return s;
}

DaemonStats Synthetic() {
  DaemonStats d;
  d.start_time_seconds = 1700000000;
  LabelStats a;
  a.key = {"train", "aug", "a", "grpc"};
  using service::Count;
  a.counts[Count::kSamples] = 640;
  a.counts[Count::kBatches] = 10;
  a.counts[Count::kBytes] = 1 << 20;
  a.counts[Count::kSkipped] = 3;
  a.counts[Count::kAcks] = 9;
  a.counts[Count::kWaitNs] = 1'500'000'000;
  a.counts[Count::kBusyNs] = 6'000'000'000;
  // decode: 2 observations at or below 1 ms, 1 above 10 s.
  auto& decode = a.latency[static_cast<int>(service::Stage::kDecode)];
  decode.counts[4] = 2;
  decode.counts[service::LatencyHistogram::kBounds.size()] = 1;
  decode.count = 3;
  decode.sum_seconds = 12.0;
  d.labels.push_back(a);
  LabelStats idle;
  idle.key = {"train", "aug", "old", "grpc"};
  d.labels.push_back(idle);
  d.streams = {OpenStream(1, "a", 2, 1), OpenStream(2, "a", 1, 3),
               OpenStream(3, "", 0, 0)};
  d.service.open_streams = 3;
  d.service.bytes_reserved = 3 << 20;
  d.service.waiting_opens = 6;
  d.service.share_fallbacks = 2;
  d.service.bytes_high_water = 5 << 20;
  d.service.memory_budget = 8 << 20;
  d.errors[static_cast<int>(absl::StatusCode::kDataLoss)] = 4;
  d.pool = {4, 2'500'000'000, 77, 5};
  d.transport_counts = {
      {"stoker_shm_socket_refused_total", "Refused.", 12, false, {}}};
  d.storage.push_back({"train",
                       "/mnt/nfs/train",
                       {"nfs4", StorageKind::kNetwork, "", "copy it"}});
  service::HelperStats h;
  h.address = "10.0.0.2:7411";
  h.up = true;
  h.open_chunks = 2;
  h.allowance = 3;
  h.chunks = 9;
  h.batches = 17;
  h.samples = 544;
  h.failures = 1;
  h.rebuilt = 2;
  h.late = 4;
  h.wire_bytes = 81'000'000;
  h.payload_bytes = 82'000'000;
  h.wait_seconds = 1.5;
  h.copy_seconds = 0.25;
  d.helpers.push_back(h);
  d.placing_remote = true;
  return d;
}

constexpr char kA[] =
    R"(dataset="train",pipeline="aug",job_id="a",transport="grpc")";
constexpr char kOld[] =
    R"(dataset="train",pipeline="aug",job_id="old",transport="grpc")";
constexpr char kAnon[] =
    R"(dataset="train",pipeline="aug",job_id="",transport="grpc")";

TEST(PrometheusCollectorTest, CountersPerLabelSet) {
  const std::string text = RenderExposition(Synthetic());
  EXPECT_EQ(Value(text, "stoker_samples_total", kA), 640);
  EXPECT_EQ(Value(text, "stoker_batches_total", kA), 10);
  EXPECT_EQ(Value(text, "stoker_bytes_total", kA), 1 << 20);
  EXPECT_EQ(Value(text, "stoker_corrupt_samples_total", kA), 3);
  EXPECT_EQ(Value(text, "stoker_acks_total", kA), 9);
  EXPECT_EQ(Value(text, "stoker_consumer_wait_seconds_total", kA), 1.5);
  EXPECT_EQ(Value(text, "stoker_consumer_busy_seconds_total", kA), 6.0);
  EXPECT_EQ(Value(text, "stoker_samples_total", kOld), 0);
  EXPECT_THAT(text, HasSubstr("# TYPE stoker_samples_total counter"));
}

TEST(PrometheusCollectorTest, HistogramBucketsAreCumulative) {
  const std::string text = RenderExposition(Synthetic());
  const std::string decode = std::string(kA) + R"(,stage="decode")";
  EXPECT_EQ(
      Value(text, "stoker_stage_seconds_bucket", decode + R"(,le="0.0005")"),
      0);
  EXPECT_EQ(
      Value(text, "stoker_stage_seconds_bucket", decode + R"(,le="0.001")"), 2);
  EXPECT_EQ(Value(text, "stoker_stage_seconds_bucket", decode + R"(,le="10")"),
            2);
  EXPECT_EQ(
      Value(text, "stoker_stage_seconds_bucket", decode + R"(,le="+Inf")"), 3);
  EXPECT_EQ(Value(text, "stoker_stage_seconds_count", decode), 3);
  EXPECT_EQ(Value(text, "stoker_stage_seconds_sum", decode), 12);
  for (const char* stage : {"read", "augment", "collate", "transfer"}) {
    EXPECT_EQ(Value(text, "stoker_stage_seconds_count",
                    std::string(kA) + ",stage=\"" + stage + "\""),
              0)
        << stage;
  }
  EXPECT_THAT(text, HasSubstr("# TYPE stoker_stage_seconds histogram"));
}

TEST(PrometheusCollectorTest, OpenStreamGaugesSumPerLabelSetAndDropToZero) {
  const std::string text = RenderExposition(Synthetic());
  EXPECT_EQ(Value(text, "stoker_streams_open", kA), 2);
  EXPECT_EQ(Value(text, "stoker_queued_batches", kA), 3);
  EXPECT_EQ(Value(text, "stoker_building_batches", kA), 4);
  EXPECT_EQ(Value(text, "stoker_streams_open", kAnon), 1);
  EXPECT_EQ(Value(text, "stoker_streams_open", kOld), 0);
  // Job "a" and the stream without a job id.
  EXPECT_EQ(Value(text, "stoker_jobs_open", ""), 2);
}

TEST(PrometheusCollectorTest, DaemonWideValues) {
  const std::string text = RenderExposition(Synthetic());
  EXPECT_EQ(Value(text, "stoker_worker_threads", ""), 4);
  EXPECT_EQ(Value(text, "stoker_worker_busy_seconds_total", ""), 2.5);
  EXPECT_EQ(Value(text, "stoker_worker_tasks_total", ""), 77);
  EXPECT_EQ(Value(text, "stoker_worker_queued_tasks", ""), 5);
  EXPECT_EQ(Value(text, "stoker_memory_reserved_bytes", ""), 3 << 20);
  EXPECT_EQ(Value(text, "stoker_streams_waiting_to_open", ""), 6);
  EXPECT_EQ(Value(text, "stoker_share_fallbacks_total", ""), 2);
  EXPECT_EQ(Value(text, "stoker_shm_socket_refused_total", ""), 12);
  EXPECT_EQ(Value(text, "stoker_memory_budget_bytes", ""), 8 << 20);
  EXPECT_EQ(Value(text, "stoker_memory_high_water_bytes", ""), 5 << 20);
  EXPECT_EQ(Value(text, "stoker_errors_total", R"(code="DATA_LOSS")"), 4);
  EXPECT_EQ(Value(text, "stoker_errors_total", R"(code="NOT_FOUND")"), 0);
  EXPECT_THAT(text, Not(HasSubstr(R"(code="OK")")));
  EXPECT_EQ(Value(text, "stoker_dataset_storage_info",
                  R"(dataset="train",fstype="nfs4",kind="network")"),
            1);
  EXPECT_EQ(Value(text, "stoker_start_time_seconds", ""), 1700000000);
}

TEST(PrometheusCollectorTest, DatasetHealthGaugesShowDamagedShards) {
  DaemonStats d = Synthetic();
  d.service.datasets = {{"good", {}, std::nullopt},
                        {"train",
                         {{"shard-00001.lmdb", "key 7: SIGBUS ..."},
                          {"shard-00003.lmdb", "key 40: SIGBUS ..."}},
                         std::nullopt}};
  const std::string text = RenderExposition(d);
  EXPECT_EQ(Value(text, "stoker_dataset_healthy", R"(dataset="good")"), 1);
  EXPECT_EQ(Value(text, "stoker_dataset_healthy", R"(dataset="train")"), 0);
  EXPECT_EQ(Value(text, "stoker_dataset_damaged_shards", R"(dataset="good")"),
            0);
  EXPECT_EQ(Value(text, "stoker_dataset_damaged_shards", R"(dataset="train")"),
            2);
}

TEST(PrometheusCollectorTest, SourceReadsOfADatasetServedWhileStaging) {
  DaemonStats d = Synthetic();
  dataset::RemoteReadStats reads;
  reads.requests = 4;
  reads.bytes = 4096;
  reads.request_ns = 2'000'000'000;
  reads.refetches = 1;
  reads.errors = 2;
  reads.cached_bytes = 1024;
  d.service.datasets = {{"local", {}, std::nullopt}, {"train", {}, reads}};
  const std::string text = RenderExposition(d);
  const std::string train = R"(dataset="train")";
  EXPECT_EQ(Value(text, "stoker_source_requests_total", train), 4);
  EXPECT_EQ(Value(text, "stoker_source_fetched_bytes_total", train), 4096);
  EXPECT_EQ(Value(text, "stoker_source_request_seconds_total", train), 2);
  EXPECT_EQ(Value(text, "stoker_source_refetches_total", train), 1);
  EXPECT_EQ(Value(text, "stoker_source_errors_total", train), 2);
  EXPECT_EQ(Value(text, "stoker_source_cache_bytes", train), 1024);
  // A dataset without a source has no such series.
  EXPECT_THAT(text, Not(HasSubstr(R"(stoker_source_requests_total{dataset="local")")));
}

TEST(PrometheusCollectorTest, NamesFollowPrometheusConventions) {
  for (const prometheus::MetricFamily& f : BuildMetricFamilies(Synthetic())) {
    EXPECT_EQ(f.name.rfind("stoker_", 0), 0u) << f.name;
    EXPECT_TRUE(std::regex_match(f.name, std::regex("[a-z_]+"))) << f.name;
    const bool total = f.name.size() > 6 &&
                       f.name.compare(f.name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(f.type == prometheus::MetricType::Counter, total) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const auto& label : m.label) {
        // Prometheus keeps `job` for the scrape job.
        EXPECT_NE(label.name, "job") << f.name;
      }
    }
  }
}

TEST(PrometheusCollectorTest, AutotuneGaugesShowWhatTheTunerChose) {
  DaemonStats d = Synthetic();
  d.pool.active_threads = 3;
  std::string text = RenderExposition(d);
  EXPECT_EQ(Value(text, "stoker_worker_threads_active", ""), 3);
  // Off: no autotune series at all.
  EXPECT_THAT(text, Not(HasSubstr("stoker_autotune_")));
  d.autotune.workers_auto = true;
  d.autotune.workers = 3;
  d.autotune.prefetch = 8;
  d.autotune.changes = 5;
  text = RenderExposition(d);
  EXPECT_EQ(Value(text, "stoker_autotune_workers", ""), 3);
  EXPECT_EQ(Value(text, "stoker_autotune_changes_total", ""), 5);
  EXPECT_THAT(text, Not(HasSubstr("stoker_autotune_prefetch")));
  d.autotune.prefetch_auto = true;
  text = RenderExposition(d);
  EXPECT_EQ(Value(text, "stoker_autotune_prefetch", ""), 8);
}

TEST(PrometheusCollectorTest, EachHelperHasItsSeries) {
  const std::string text = RenderExposition(Synthetic());
  constexpr char kH[] = R"(helper="10.0.0.2:7411")";
  EXPECT_EQ(Value(text, "stoker_helpers_placing", ""), 1);
  EXPECT_EQ(Value(text, "stoker_helper_up", kH), 1);
  EXPECT_EQ(Value(text, "stoker_helper_open_chunks", kH), 2);
  EXPECT_EQ(Value(text, "stoker_helper_chunk_allowance", kH), 3);
  EXPECT_EQ(Value(text, "stoker_helper_batches_total", kH), 17);
  EXPECT_EQ(Value(text, "stoker_helper_samples_total", kH), 544);
  EXPECT_EQ(Value(text, "stoker_helper_failures_total", kH), 1);
  EXPECT_EQ(Value(text, "stoker_helper_rebuilt_batches_total", kH), 2);
  EXPECT_EQ(Value(text, "stoker_helper_late_batches_total", kH), 4);
  EXPECT_EQ(Value(text, "stoker_helper_wire_bytes_total", kH), 81'000'000);
  EXPECT_EQ(Value(text, "stoker_helper_payload_bytes_total", kH), 82'000'000);
  EXPECT_EQ(Value(text, "stoker_helper_wait_seconds_total", kH), 1.5);
  EXPECT_EQ(Value(text, "stoker_helper_copy_seconds_total", kH), 0.25);
  // A daemon without helpers exports none of these.
  DaemonStats alone = Synthetic();
  alone.helpers.clear();
  EXPECT_THAT(RenderExposition(alone), Not(HasSubstr("stoker_helper")));
}

TEST(PrometheusCollectorTest, EmptyDaemonRenders) {
  const std::string text = RenderExposition(DaemonStats{});
  EXPECT_EQ(Value(text, "stoker_jobs_open", ""), 0);
  EXPECT_THAT(text, HasSubstr("# TYPE stoker_samples_total counter"));
}

}  // namespace
}  // namespace stoker::metrics

namespace stoker::metrics {
namespace {

TEST(PrometheusCollectorTest, EachStagedDatasetHasItsSeries) {
  DaemonStats d;
  EXPECT_THAT(RenderExposition(d), Not(HasSubstr("stoker_stage_bytes")));
  staging::StageStatus s;
  s.dataset = "train";
  s.state = staging::StageStatus::State::kCopying;
  s.bytes_total = 1000;
  s.bytes_done = 600;
  s.bytes_moved = 650;
  s.shards_total = 4;
  s.shards_done = 2;
  s.retries = 3;
  s.errors = {{"503", 2}, {"transport", 1}};
  s.remote_records = 7;
  d.staging.push_back(s);
  const std::string text = RenderExposition(d);
  constexpr char kD[] = R"(dataset="train")";
  EXPECT_EQ(Value(text, "stoker_stage_bytes_total", kD), 650);
  EXPECT_EQ(Value(text, "stoker_stage_remaining_bytes", kD), 400);
  EXPECT_EQ(Value(text, "stoker_stage_size_bytes", kD), 1000);
  EXPECT_EQ(Value(text, "stoker_stage_shards_staged", kD), 2);
  EXPECT_EQ(Value(text, "stoker_stage_shards", kD), 4);
  EXPECT_EQ(Value(text, "stoker_stage_servable", kD), 0);
  EXPECT_EQ(Value(text, "stoker_stage_complete", kD), 0);
  EXPECT_EQ(Value(text, "stoker_stage_retries_total", kD), 3);
  EXPECT_EQ(Value(text, "stoker_stage_remote_records_total", kD), 7);
  EXPECT_EQ(Value(text, "stoker_stage_errors_total",
                  R"(dataset="train",status="503")"),
            2);
  EXPECT_EQ(Value(text, "stoker_stage_errors_total",
                  R"(dataset="train",status="transport")"),
            1);
}

}  // namespace
}  // namespace stoker::metrics
