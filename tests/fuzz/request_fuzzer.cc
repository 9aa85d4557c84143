// Fuzzes request validation: the bytes of a client's first StreamRequest,
// parsed as the gRPC adapter parses them (stream_reactor.cc), converted with
// ToSpec and admitted by StreamService::Open against a real catalog (a tiny
// packed dataset and two pipelines).
//
// What must hold: nothing crashes; a refusal has one of the codes the
// service documents; an admitted stream keeps every bound of the service
// (batch size, prefetch, bytes per batch, memory budget) and gives all it
// reserved back once dropped.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/catalog.h"
#include "server/service/stream_service.h"
#include "server/transport/wire.h"
#include "stoker/v1/stoker.pb.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker {
namespace {

using pipeline::OpConfig;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_request: %s\n", what);
    abort();
  }
}

// Bounds small enough that the fuzzer reaches each of them.
service::ServiceOptions FuzzOptions() {
  service::ServiceOptions o;
  o.max_batch_size = 256;
  o.max_prefetch = 16;
  o.default_prefetch = 4;
  o.max_streams = 8;
  o.max_batch_bytes = 16 << 20;
  o.memory_budget = 64 << 20;
  return o;
}
const service::ServiceOptions kOptions = FuzzOptions();

std::unique_ptr<pipeline::Pipeline> MustCreate(
    std::string name, const std::vector<OpConfig>& ops) {
  auto p = pipeline::Pipeline::Create(std::move(name), ops);
  Check(p.ok(), "a fuzz pipeline does not build");
  return *std::move(p);
}

// What every input runs against; built once.
struct World {
  testing::ScopedTempDir dir;
  pipeline::WorkerPool pool{1};
  std::unique_ptr<service::StreamService> service;

  World() {
    auto path = testing::MakeTestDataset(dir.path(), 20, 2, 2, /*seed=*/1);
    Check(path.ok(), "the fuzz dataset cannot be made");
    auto ds = dataset::Dataset::Open("train", *path);
    Check(ds.ok(), "the fuzz dataset does not open");
    std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets;
    datasets["train"] = *std::move(ds);
    std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines;
    pipelines["train"] = MustCreate(
        "train", {{"decode_jpeg", {}, 0},
                  {"random_resized_crop", {{"size", int64_t{32}}}, 0},
                  {"random_flip", {}, 0},
                  {"normalize",
                   {{"mean", std::vector<double>{0.5, 0.5, 0.5}},
                    {"std", std::vector<double>{0.2, 0.2, 0.2}},
                    {"dtype", std::string("float32")}},
                   0},
                  {"layout", {{"value", std::string("chw")}}, 0}});
    pipelines["bytes"] = MustCreate(
        "bytes",
        {{"decode_jpeg", {}, 0},
         {"resize", {{"size", std::vector<double>{16, 16}}}, 0}});
    service = std::make_unique<service::StreamService>(
        &pool, kOptions,
        std::make_shared<service::Catalog>(std::move(datasets),
                                           std::move(pipelines)));
  }
};

}  // namespace
}  // namespace stoker

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoker;  // NOLINT: a fuzzer's entry point.
  static World* world = new World();  // Lives until exit, on purpose.
  v1::StreamRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size)) ||
      !request.has_open()) {
    return 0;  // The adapter refuses these before any validation.
  }
  service::StreamSpec spec = transport::ToSpec(request.open());
  // As the reactor sets it from the transport asked for (shm's client
  // holds batches, which widens the window).
  spec.client_holds = request.open().transport() == v1::TRANSPORT_SHM;
  absl::StatusOr<service::OpenedStream> opened = world->service->Open(spec);
  if (!opened.ok()) {
    const absl::StatusCode code = opened.status().code();
    Check(code == absl::StatusCode::kInvalidArgument ||
              code == absl::StatusCode::kNotFound ||
              code == absl::StatusCode::kResourceExhausted,
          "a refused request has an undocumented status code");
    Check(!opened.status().message().empty(), "a refusal has no message");
    return 0;
  }
  Check(spec.batch_size >= 1 && spec.batch_size <= kOptions.max_batch_size,
        "admitted a batch size outside its bound");
  Check(opened->prefetch >= 1 && opened->prefetch <= kOptions.max_prefetch,
        "granted a prefetch outside its bound");
  Check(opened->window >= opened->prefetch,
        "the transport window is smaller than the prefetch depth");
  Check(opened->batch_bytes <= kOptions.max_batch_bytes,
        "admitted a batch over max_batch_bytes");
  Check(opened->ticket->bytes() ==
            uint64_t{opened->window} * opened->batch_bytes,
        "the reservation is not window x batch bytes");
  Check(world->service->GetStats().bytes_reserved <= kOptions.memory_budget,
        "admitted a stream over the memory budget");
  Check(opened->stream->steps_per_epoch() >= 1, "admitted an empty stream");
  opened = absl::CancelledError("dropped");
  const service::StreamService::Stats stats = world->service->GetStats();
  Check(stats.open_streams == 0 && stats.bytes_reserved == 0,
        "a dropped stream kept its reservation");
  return 0;
}
