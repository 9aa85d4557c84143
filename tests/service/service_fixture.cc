#include "tests/service/service_fixture.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "server/service/open_planner.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::service::fixture {
namespace {

pipeline::OpConfig ShortTokens(const std::string& overflow) {
  return {"ragged_limit",
          {{"field", std::string("tokens")},
           {"max_length", int64_t{5}},
           {"overflow", overflow}},
          0};
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Catalog>> MakeTypedCatalog(
    const std::string& dir, int num_samples) {
  const testing::TypedSamples samples = testing::MakeTypedSamples(num_samples);
  const std::string path = dir + "/typed";
  if (absl::Status s =
          testing::WriteTypedDataset(path, samples.schema, samples.records);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<dataset::Dataset>> ds =
      dataset::Dataset::Open("typed", path);
  if (!ds.ok()) return ds.status();
  std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets;
  datasets["typed"] = *std::move(ds);
  const pipeline::OpConfig drop_caption{
      "drop_fields", {{"value", std::vector<std::string>{"caption"}}}, 0};
  std::map<std::string, std::vector<pipeline::OpConfig>> defs = {
      {"all", {drop_caption}},
      {"short_skip", {drop_caption, ShortTokens("skip")}},
      {"short_fail", {drop_caption, ShortTokens("fail")}},
  };
  std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines;
  for (auto& [name, ops] : defs) {
    auto p = pipeline::Pipeline::Create(name, ops);
    if (!p.ok()) return p.status();
    pipelines[name] = *std::move(p);
  }
  return std::make_shared<const Catalog>(std::move(datasets),
                                         std::move(pipelines));
}

StreamSpec TypedSpec(const std::string& pipeline, uint32_t batch_size,
                     uint64_t epochs) {
  StreamSpec spec;
  spec.dataset = "typed";
  spec.pipeline = pipeline;
  spec.batch_size = batch_size;
  spec.epochs = epochs;
  spec.seed = 7;
  return spec;
}

absl::StatusOr<Stream::Options> OptionsFor(
    const StreamSpec& spec, std::shared_ptr<const Catalog> catalog,
    pipeline::WorkerPool* pool, OnCorrupt on_corrupt) {
  OpenLimits limits;
  limits.on_corrupt = on_corrupt;
  absl::StatusOr<OpenPlan> plan = PlanOpen(spec, std::move(catalog), limits);
  if (!plan.ok()) return plan.status();
  Stream::Options options = std::move(plan->stream);
  options.pool = pool;
  options.group = std::make_shared<PoolGroup>(pool, 1.0);
  options.counters = std::make_shared<StreamCounters>();
  return options;
}

std::vector<int64_t> Labels(const ReadyBatch& batch) {
  std::vector<int64_t> out;
  for (const BatchTensor& t : batch.tensors) {
    if (t.spec.name != "label") continue;
    out.resize(t.length / sizeof(int64_t));
    std::memcpy(out.data(), batch.buffer->data() + t.offset,
                out.size() * sizeof(int64_t));
  }
  return out;
}

Drained Drain(Stream& stream, uint32_t window, size_t max_batches) {
  // A CondVar rather than Mutex::Await: under TSan (tests/tsan/), Await's
  // condition runs where the sanitizer cannot see the lock held.
  absl::Mutex mu;
  absl::CondVar moved;
  uint64_t signals = 0;
  stream.SetReadyCallback([&] {
    absl::MutexLock lock(&mu);
    ++signals;
    moved.SignalAll();
  });
  Drained out;
  // Batches started and not yet taken, those started before included.
  const StreamStats before = stream.stats();
  uint32_t started = static_cast<uint32_t>(before.queued + before.building);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (;;) {
    uint64_t seen;
    {
      absl::MutexLock lock(&mu);
      seen = signals;
    }
    while (started < window && stream.HasMore() &&
           stream.Fill(std::make_unique<HeapBatchBuffer>(
               stream.layout().Capacity()))) {
      ++started;
    }
    bool progressed = false;
    while (std::optional<ReadyBatch> b = stream.TakeReady()) {
      out.batches.push_back(*std::move(b));
      --started;
      progressed = true;
      if (out.batches.size() == max_batches) break;
    }
    if (out.batches.size() == max_batches || stream.Done()) {
      out.status = stream.status();
      break;
    }
    if (progressed) continue;
    absl::MutexLock lock(&mu);
    bool timed_out = false;
    while (signals == seen && !timed_out) {
      timed_out = moved.WaitWithDeadline(&mu, deadline);
    }
    if (signals == seen) {
      const StreamStats st = stream.stats();
      out.status = absl::DeadlineExceededError(absl::StrCat(
          "the stream stalled after ", out.batches.size(), " batches, ",
          st.queued, " finished and not taken, ", st.building,
          " being built"));
      break;
    }
  }
  stream.SetReadyCallback(nullptr);
  return out;
}

}  // namespace stoker::service::fixture
