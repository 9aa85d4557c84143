// `stoker top`'s model: the verdict from synthetic stage timings (every
// verdict reachable), and the view built from two synthetic snapshots.
#include "client/cli/top_view.h"

#include "client/cli/top_command.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMs = 1e-3;

// A data-bound input (the consumer waits half its time) on 8 workers.
VerdictInput DataBound(StageTimes t) {
  VerdictInput in;
  in.samples_per_second = 1000;
  in.acks_per_second = 15;
  in.stall_share = 0.5;
  in.per_sample = t;
  in.worker_threads = 8;
  in.worker_busy_ratio = 0.95;
  return in;
}

TEST(DiagnoseTest, NothingMovingIsIdle) {
  const Verdict v = Diagnose(VerdictInput{});
  EXPECT_EQ(v.bottleneck, Bottleneck::kIdle);
  EXPECT_EQ(v.change, "");
}

TEST(DiagnoseTest, LowStallIsConsumerBound) {
  VerdictInput in = DataBound({0.1 * kMs, 5 * kMs, 1 * kMs, 1 * kMs, 0});
  in.stall_share = 0.02;
  const Verdict v = Diagnose(in);
  EXPECT_EQ(v.bottleneck, Bottleneck::kConsumer);
  EXPECT_THAT(v.change, HasSubstr("training loop"));
  EXPECT_THAT(v.reason, HasSubstr("2%"));
}

TEST(DiagnoseTest, StallJustAtTheThresholdIsDataBound) {
  VerdictInput in = DataBound({0.1 * kMs, 5 * kMs, 1 * kMs, 1 * kMs, 0});
  in.stall_share = kStallThreshold;
  EXPECT_NE(Diagnose(in).bottleneck, Bottleneck::kConsumer);
}

TEST(DiagnoseTest, DecodeDominatingIsCpuBound) {
  const Verdict v = Diagnose(
      DataBound({0.05 * kMs, 6 * kMs, 1 * kMs, 0.5 * kMs, 0.01 * kMs}));
  EXPECT_EQ(v.bottleneck, Bottleneck::kCpu);
  EXPECT_THAT(v.change, HasSubstr("more workers"));
  EXPECT_THAT(v.change, HasSubstr("fused"));
  EXPECT_THAT(v.change, HasSubstr("smaller output"));
  EXPECT_THAT(v.change, Not(HasSubstr("prefetch")));
}

TEST(DiagnoseTest, CpuBoundWithIdleWorkersSuggestsPrefetch) {
  VerdictInput in = DataBound({0.05 * kMs, 6 * kMs, 1 * kMs, 0.5 * kMs, 0});
  in.worker_busy_ratio = 0.3;
  const Verdict v = Diagnose(in);
  EXPECT_EQ(v.bottleneck, Bottleneck::kCpu);
  EXPECT_THAT(v.change, HasSubstr("raise prefetch"));
}

TEST(DiagnoseTest, ReadsDominatingAreStorageBound) {
  const Verdict v =
      Diagnose(DataBound({9 * kMs, 4 * kMs, 1 * kMs, 0.5 * kMs, 0}));
  EXPECT_EQ(v.bottleneck, Bottleneck::kStorage);
  EXPECT_THAT(v.change, HasSubstr("local SSD"));
}

TEST(DiagnoseTest, NetworkStorageTipsAQuarterOfReadTimeToStorageBound) {
  VerdictInput in = DataBound({2 * kMs, 4 * kMs, 1 * kMs, 1 * kMs, 0});
  EXPECT_EQ(Diagnose(in).bottleneck, Bottleneck::kCpu);
  in.storage_kind = "network";
  const Verdict v = Diagnose(in);
  EXPECT_EQ(v.bottleneck, Bottleneck::kStorage);
  EXPECT_THAT(v.reason, HasSubstr("network storage"));
  in.storage_kind = "rotational";
  EXPECT_EQ(Diagnose(in).bottleneck, Bottleneck::kStorage);
}

TEST(DiagnoseTest, SlowHandOverIsTransportBound) {
  // 8 workers build 8 / 5 ms = 1600 samples/s; the transport hands over
  // 1 / 1 ms = 1000 samples/s.
  const Verdict v =
      Diagnose(DataBound({0.1 * kMs, 4 * kMs, 0.5 * kMs, 0.4 * kMs, 1 * kMs}));
  EXPECT_EQ(v.bottleneck, Bottleneck::kTransport);
  EXPECT_THAT(v.change, HasSubstr("shm"));
  EXPECT_THAT(v.change, HasSubstr("cuda_ipc"));
}

TEST(DiagnoseTest, SlowHandOverOnShmPointsAtTheConsumerSide) {
  VerdictInput in =
      DataBound({0.1 * kMs, 4 * kMs, 0.5 * kMs, 0.4 * kMs, 1 * kMs});
  in.transport = "shm";
  const Verdict v = Diagnose(in);
  EXPECT_EQ(v.bottleneck, Bottleneck::kTransport);
  EXPECT_THAT(v.change, Not(HasSubstr("use the shm")));
}

TEST(DiagnoseTest, FastEnoughTransportIsNotTheBottleneck) {
  // The transport (2000 samples/s) outpaces 8 workers (1600 samples/s).
  const Verdict v = Diagnose(
      DataBound({0.1 * kMs, 4 * kMs, 0.5 * kMs, 0.4 * kMs, 0.5 * kMs}));
  EXPECT_EQ(v.bottleneck, Bottleneck::kCpu);
}

TEST(DiagnoseTest, EveryVerdictHasAName) {
  EXPECT_STREQ(BottleneckName(Bottleneck::kIdle), "idle");
  EXPECT_STREQ(BottleneckName(Bottleneck::kConsumer), "consumer-bound");
  EXPECT_STREQ(BottleneckName(Bottleneck::kStorage), "storage-bound");
  EXPECT_STREQ(BottleneckName(Bottleneck::kCpu), "cpu-bound");
  EXPECT_STREQ(BottleneckName(Bottleneck::kTransport), "transport-bound");
}

// ---- BuildView over two synthetic GetStats replies. ----

void AddStage(v1::LabelStats* l, const char* name, uint64_t count, double sum) {
  v1::StageLatency* s = l->add_stages();
  s->set_stage(name);
  s->set_count(count);
  s->set_sum_seconds(sum);
}

v1::LabelStats* AddLabels(v1::DaemonStats* d, const std::string& job,
                          uint64_t samples, double wait, double busy,
                          double decode_sum) {
  v1::LabelStats* l = d->add_labels();
  l->set_dataset("train");
  l->set_pipeline("aug");
  l->set_job_id(job);
  l->set_transport("grpc");
  (*l->mutable_counts())["samples"] = samples;
  (*l->mutable_counts())["batches"] = samples / 10;
  (*l->mutable_counts())["bytes"] = samples * 100;
  (*l->mutable_counts())["acks"] = samples / 10;
  (*l->mutable_counts())["wait_seconds"] = wait;
  (*l->mutable_counts())["busy_seconds"] = busy;
  AddStage(l, "read", samples, samples * 0.0001);
  AddStage(l, "decode", samples, decode_sum);
  AddStage(l, "augment", samples, samples * 0.0002);
  AddStage(l, "collate", samples, samples * 0.0001);
  AddStage(l, "transfer", samples / 10, samples / 10 * 0.0005);
  return l;
}

v1::StreamStats* AddStream(v1::DaemonStats* d, uint64_t id,
                           const std::string& job, uint64_t samples,
                           double wait, double busy) {
  v1::StreamStats* s = d->add_streams();
  s->set_id(id);
  s->set_dataset("train");
  s->set_pipeline("aug");
  s->set_job_id(job);
  s->set_transport("grpc");
  s->set_prefetch(4);
  (*s->mutable_counts())["samples"] = samples;
  (*s->mutable_counts())["batches"] = samples / 10;
  (*s->mutable_counts())["bytes"] = samples * 100;
  (*s->mutable_counts())["wait_seconds"] = wait;
  (*s->mutable_counts())["busy_seconds"] = busy;
  return s;
}

v1::DaemonStats Base(double uptime, uint64_t busy_ns) {
  v1::DaemonStats d;
  d.set_uptime_seconds(uptime);
  d.mutable_pool()->set_threads(4);
  d.mutable_pool()->set_busy_ns(busy_ns);
  d.mutable_memory()->set_reserved_bytes(1 << 20);
  d.mutable_memory()->set_budget_bytes(4 << 20);
  v1::StorageStats* s = d.add_storage();
  s->set_dataset("train");
  s->set_fstype("ext4");
  s->set_kind("local");
  return d;
}

TEST(BuildViewTest, RatesStallAndStagesComeFromDeltas) {
  v1::DaemonStats before = Base(10, 1'000'000'000);
  AddLabels(&before, "a", 1000, 5, 5, 1000 * 0.004);
  AddLabels(&before, "gone", 500, 1, 1, 1);  // No change: not shown.
  AddStream(&before, 1, "a", 1000, 5, 5);
  v1::DaemonStats after = Base(12, 5'000'000'000);
  // Job a: 2000 samples more in 2 s, waited 1 s of 4; decode 4 ms/sample.
  AddLabels(&after, "a", 3000, 6, 8, 1000 * 0.004 + 2000 * 0.004);
  AddLabels(&after, "gone", 500, 1, 1, 1);
  AddStream(&after, 1, "a", 2000, 5.5, 6.5);
  AddStream(&after, 2, "a", 1000, 0.5, 1.5);  // Opened in the interval.
  after.set_open_streams(2);

  const TopView v = BuildView(before, after);
  EXPECT_DOUBLE_EQ(v.interval_seconds, 2);
  EXPECT_DOUBLE_EQ(v.worker_busy_ratio, 4.0 / (2 * 4));
  EXPECT_EQ(v.open_jobs, 1);
  ASSERT_EQ(v.streams.size(), 2u);
  EXPECT_DOUBLE_EQ(v.streams[0].samples_per_second, 500);
  EXPECT_DOUBLE_EQ(v.streams[0].stall_share, 0.5 / 2);
  EXPECT_DOUBLE_EQ(v.streams[1].samples_per_second, 500);
  EXPECT_DOUBLE_EQ(v.streams[1].stall_share, 0.25);
  ASSERT_EQ(v.jobs.size(), 1u);
  const JobRow& j = v.jobs[0];
  EXPECT_EQ(j.job_id, "a");
  EXPECT_EQ(j.streams, 2);
  EXPECT_DOUBLE_EQ(j.samples_per_second, 1000);
  EXPECT_DOUBLE_EQ(j.stall_share, 0.25);
  EXPECT_NEAR(j.per_sample.decode, 0.004, 1e-12);
  EXPECT_NEAR(j.per_sample.read, 0.0001, 1e-12);
  EXPECT_NEAR(j.per_sample.transfer, 0.0005 / 10, 1e-12);
  EXPECT_EQ(j.verdict.bottleneck, Bottleneck::kCpu);
  EXPECT_EQ(v.verdict.bottleneck, Bottleneck::kCpu);
}

TEST(BuildViewTest, ConsumerBoundStreamGivesConsumerVerdictAndJson) {
  v1::DaemonStats before = Base(1, 0);
  AddLabels(&before, "t", 100, 0.01, 1, 100 * 0.001);
  v1::DaemonStats after = Base(2, 100'000'000);
  AddLabels(&after, "t", 500, 0.02, 2, 500 * 0.001);
  AddStream(&after, 7, "t", 500, 0.02, 2);
  const TopView v = BuildView(before, after);
  EXPECT_EQ(v.verdict.bottleneck, Bottleneck::kConsumer);
  const nlohmann::json j = ToJson(v);
  EXPECT_EQ(j["verdict"]["bottleneck"], "consumer-bound");
  EXPECT_EQ(j["streams"][0]["id"], 7);
  EXPECT_EQ(j["jobs"][0]["job_id"], "t");
  EXPECT_DOUBLE_EQ(j["jobs"][0]["samples_per_second"].get<double>(), 400);
  EXPECT_TRUE(j["jobs"][0]["stages"].contains("decode"));
  EXPECT_EQ(j["storage"][0]["kind"], "local");
  EXPECT_EQ(j["workers"]["threads"], 4);
  const std::string screen = Render(v, "unix:/x.sock");
  EXPECT_THAT(screen, HasSubstr("VERDICT  consumer-bound"));
  EXPECT_THAT(screen, HasSubstr("unix:/x.sock"));
}

TEST(BuildViewTest, EveryCountOfTheMapShowsPerSecondWithoutAnEdit) {
  v1::DaemonStats before = Base(10, 0);
  AddLabels(&before, "a", 1000, 1, 1, 1);
  (*AddStream(&before, 1, "a", 1000, 1, 1)->mutable_counts())["new_count"] = 4;
  v1::DaemonStats after = Base(12, 0);
  (*AddLabels(&after, "a", 2000, 2, 2, 2)->mutable_counts())["new_count"] = 6;
  (*AddStream(&after, 1, "a", 2000, 2, 2)->mutable_counts())["new_count"] = 10;
  const TopView v = BuildView(before, after);
  ASSERT_EQ(v.streams.size(), 1u);
  EXPECT_DOUBLE_EQ(v.streams[0].per_second.at("new_count"), 3);
  EXPECT_DOUBLE_EQ(v.streams[0].per_second.at("samples"), 500);
  ASSERT_EQ(v.jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(v.jobs[0].per_second.at("new_count"), 3);
  const nlohmann::json j = ToJson(v);
  EXPECT_DOUBLE_EQ(j["streams"][0]["per_second"]["new_count"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(j["jobs"][0]["per_second"]["new_count"].get<double>(), 3);
}

TEST(BuildViewTest, NetworkStorageMakesReadHeavyJobStorageBound) {
  v1::DaemonStats before = Base(1, 0);
  before.mutable_storage(0)->set_kind("network");
  v1::LabelStats* l0 = AddLabels(&before, "n", 0, 0, 0, 0);
  (void)l0;
  v1::DaemonStats after = Base(2, 3'900'000'000);
  after.mutable_storage(0)->set_kind("network");
  v1::LabelStats* l = AddLabels(&after, "n", 100, 0.9, 0.1, 100 * 0.003);
  AddStream(&after, 3, "n", 100, 0.9, 0.1);
  l->mutable_stages(0)->set_sum_seconds(100 * 0.002);  // Read: 2 ms.
  const TopView v = BuildView(before, after);
  ASSERT_EQ(v.jobs.size(), 1u);
  EXPECT_EQ(v.jobs[0].verdict.bottleneck, Bottleneck::kStorage);
  EXPECT_EQ(v.verdict.bottleneck, Bottleneck::kStorage);
}

TEST(BuildViewTest, HelpersShowTheirRateShareAndBytesPerSample) {
  v1::DaemonStats before = Base(10, 0);
  AddLabels(&before, "a", 1000, 5, 5, 1000 * 0.004);
  v1::HelperStats* h0 = before.add_helpers();
  h0->set_address("10.0.0.2:7411");
  h0->set_samples(100);
  h0->set_wire_bytes(100 * 150000);
  h0->set_copy_seconds(0.01);
  v1::DaemonStats after = Base(12, 4'000'000'000);
  AddLabels(&after, "a", 3000, 6, 8, 3000 * 0.004);
  AddStream(&after, 5, "a", 2000, 1, 3);  // The job runs.
  after.set_placing_remote(true);
  v1::HelperStats* h1 = after.add_helpers();
  h1->set_address("10.0.0.2:7411");
  h1->set_up(true);
  h1->set_open_chunks(2);
  h1->set_allowance(4);
  h1->set_samples(900);  // 800 of the interval's 2000 samples.
  h1->set_wire_bytes(900 * 150000);
  h1->set_copy_seconds(0.01 + 800 * 0.0002);
  h1->set_failures(1);
  h1->set_last_error("UNAVAILABLE: gone");
  const TopView v = BuildView(before, after);
  ASSERT_EQ(v.helpers.size(), 1u);
  const HelperRow& h = v.helpers[0];
  EXPECT_TRUE(h.up);
  EXPECT_DOUBLE_EQ(h.samples_per_second, 400);
  EXPECT_DOUBLE_EQ(h.share, 0.4);
  EXPECT_DOUBLE_EQ(h.wire_bytes_per_sample, 150000);
  EXPECT_NEAR(h.copy_seconds_per_sample, 0.0002, 1e-12);
  EXPECT_EQ(h.failures, 1u);
  EXPECT_TRUE(v.placing_remote);
  const nlohmann::json j = ToJson(v);
  EXPECT_EQ(j["helpers"][0]["address"], "10.0.0.2:7411");
  EXPECT_DOUBLE_EQ(j["helpers"][0]["share"].get<double>(), 0.4);
  const std::string screen = Render(v, "unix:/x.sock");
  EXPECT_THAT(screen, HasSubstr("HELPERS  new chunks go to helpers"));
  EXPECT_THAT(screen, HasSubstr("10.0.0.2:7411"));
  EXPECT_THAT(screen, HasSubstr("146.5"));  // KB per sample.
  // Without helpers in the config, no HELPERS section.
  EXPECT_THAT(Render(BuildView(Base(1, 0), Base(2, 0)), "a"),
              Not(HasSubstr("HELPERS")));
}

void AddGpuValue(v1::DaemonStats* s, const std::string& metric, double value) {
  v1::NamedValue* n = s->add_transport_values();
  n->set_metric(metric);
  (*n->mutable_labels())["gpu"] = "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6c";
  n->set_value(value);
}

TEST(BuildViewTest, GpusShowCudaIpcCopiesAndKernelPerBatch) {
  v1::DaemonStats before = Base(10, 0);
  AddGpuValue(&before, "stoker_cuda_batches_total", 100);
  AddGpuValue(&before, "stoker_cuda_h2d_bytes_total", 100 * 38.5e6);
  AddGpuValue(&before, "stoker_cuda_h2d_seconds_total", 100 * 0.0015);
  AddGpuValue(&before, "stoker_cuda_kernel_seconds_total", 100 * 0.0004);
  v1::DaemonStats after = Base(12, 0);
  AddGpuValue(&after, "stoker_cuda_device_bytes", 800 << 20);
  AddGpuValue(&after, "stoker_cuda_batches_total", 140);  // 40 in 2 s.
  AddGpuValue(&after, "stoker_cuda_h2d_bytes_total", 140 * 38.5e6);
  AddGpuValue(&after, "stoker_cuda_h2d_seconds_total", 100 * 0.0015 + 40 * 0.0014);
  AddGpuValue(&after, "stoker_cuda_kernel_seconds_total", 100 * 0.0004 + 40 * 0.0005);
  // A value without a gpu label is not a GPU's.
  after.add_transport_values()->set_metric("stoker_shm_socket_refused_total");
  const TopView v = BuildView(before, after);
  ASSERT_EQ(v.gpus.size(), 1u);
  const GpuRow& g = v.gpus[0];
  EXPECT_EQ(g.gpu, "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6c");
  EXPECT_EQ(g.device_bytes, 800u << 20);
  EXPECT_DOUBLE_EQ(g.batches_per_second, 20);
  EXPECT_NEAR(g.h2d_ms_per_batch, 1.4, 1e-9);
  EXPECT_NEAR(g.kernel_ms_per_batch, 0.5, 1e-9);
  EXPECT_NEAR(g.h2d_gbps, 38.5e6 / 0.0014 / 1e9, 1e-6);
  EXPECT_EQ(ToJson(v)["gpus"][0]["device_bytes"], 800u << 20);
  const std::string screen = Render(v, "unix:/x.sock");
  EXPECT_THAT(screen, HasSubstr("GPUS (cuda_ipc)"));
  EXPECT_THAT(screen, HasSubstr("800.0"));  // MiB on the device.
  // Without cuda_ipc streams, no GPUS section.
  EXPECT_THAT(Render(BuildView(Base(1, 0), Base(2, 0)), "a"),
              Not(HasSubstr("GPUS")));
}

TEST(BuildViewTest, AJobWhoseStreamsEndedInTheIntervalIsNotShownLive) {
  // `stoker top --once` right after a stream ended: the job delivered in
  // the interval, and has no stream open now.
  v1::DaemonStats before = Base(1, 0);
  AddLabels(&before, "done", 100, 0.5, 0.5, 100 * 0.001);
  AddStream(&before, 4, "done", 100, 0.5, 0.5);
  v1::DaemonStats after = Base(2, 500'000'000);
  AddLabels(&after, "done", 300, 1, 1, 300 * 0.001);
  const TopView v = BuildView(before, after);
  EXPECT_TRUE(v.streams.empty());
  EXPECT_TRUE(v.jobs.empty());
  EXPECT_EQ(v.verdict.bottleneck, Bottleneck::kIdle);
  const std::string screen = Render(v, "a");
  EXPECT_THAT(screen, HasSubstr("no stream open"));
  EXPECT_THAT(screen, Not(HasSubstr("done")));
}

TEST(BuildViewTest, NoTrafficIsIdle) {
  v1::DaemonStats before = Base(1, 0);
  v1::DaemonStats after = Base(2, 0);
  const TopView v = BuildView(before, after);
  EXPECT_TRUE(v.jobs.empty());
  EXPECT_EQ(v.verdict.bottleneck, Bottleneck::kIdle);
  EXPECT_THAT(Render(v, "a"), HasSubstr("no stream open"));
}

TEST(BuildViewTest, StagingRowsTakeTheirRateAndEtaFromTheInterval) {
  v1::DaemonStats before = Base(10, 0);
  v1::StagingStats* b = before.add_staging();
  b->set_dataset("train");
  b->set_state("copying");
  b->set_bytes_total(100 << 20);
  b->set_bytes_done(20 << 20);
  b->set_bytes_fetched(20 << 20);
  v1::DaemonStats after = Base(12, 0);
  v1::StagingStats* a = after.add_staging();
  *a = *b;
  a->set_bytes_done(40 << 20);  // 20 MiB in 2 s: 10 MiB/s, 60 MiB left.
  a->set_bytes_fetched(40 << 20);
  a->set_remote_records(5);
  const TopView v = BuildView(before, after);
  ASSERT_EQ(v.staging.size(), 1u);
  const StagingRow& r = v.staging[0];
  EXPECT_EQ(r.dataset, "train");
  EXPECT_DOUBLE_EQ(r.percent, 40);
  EXPECT_DOUBLE_EQ(r.bytes_per_second, 10 << 20);
  EXPECT_DOUBLE_EQ(r.eta_seconds, 6);
  EXPECT_EQ(r.remote_records, 5u);
  const nlohmann::json j = ToJson(v);
  EXPECT_EQ(j["staging"][0]["state"], "copying");
  EXPECT_DOUBLE_EQ(j["staging"][0]["eta_seconds"].get<double>(), 6);
}

}  // namespace
}  // namespace stoker::cli
