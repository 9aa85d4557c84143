#include "server/service/open_planner.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/sampler.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/stream_session.h"

namespace stoker::service {

absl::Status CheckBounds(const StreamSpec& spec, const OpenLimits& limits) {
  if (spec.batch_size == 0 || spec.batch_size > limits.max_batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", spec.batch_size,
                     " is outside the bound [1, max_batch_size=",
                     limits.max_batch_size, "]"));
  }
  if (spec.prefetch > limits.max_prefetch) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch ", spec.prefetch,
                     " is over the bound max_prefetch=", limits.max_prefetch));
  }
  // The ring of an shm stream has prefetch + hold slots: unbounded, the sum
  // could wrap (tests/fuzz/corpus/fuzz_request/crash-hold-wraps-window).
  if (spec.hold > limits.max_prefetch) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold ", spec.hold,
                     " is over the bound max_prefetch=", limits.max_prefetch));
  }
  if (spec.world_size == 0 || spec.rank >= spec.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", spec.rank, " is not below world_size ",
                     spec.world_size));
  }
  // Outside this range a weight is meaningless to the scheduler (1e-300
  // once broke fairness for the daemon's life); NaN fails the test too.
  if (!(spec.weight >= pipeline::WorkerPool::kMinWeight &&
        spec.weight <= pipeline::WorkerPool::kMaxWeight)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "weight %g is outside the bound [%g, %g]", spec.weight,
        pipeline::WorkerPool::kMinWeight, pipeline::WorkerPool::kMaxWeight));
  }
  if (spec.job_id.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id is ", spec.job_id.size(),
                     " bytes, over the bound of ", kMaxNameBytes));
  }
  for (const auto& [what, name] :
       {std::pair{"dataset", &spec.dataset}, {"pipeline", &spec.pipeline}}) {
    if (name->size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " name is ", name->size(),
                       " bytes, over the bound of ", kMaxNameBytes));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenPlan> PlanOpen(const StreamSpec& spec,
                                  std::shared_ptr<const Catalog> catalog,
                                  const OpenLimits& limits) {
  if (absl::Status s = CheckBounds(spec, limits); !s.ok()) return s;
  absl::StatusOr<const dataset::Dataset*> dataset =
      catalog->FindDataset(spec.dataset);
  if (!dataset.ok()) return dataset.status();
  absl::StatusOr<const pipeline::Pipeline*> pipe =
      catalog->FindPipeline(spec.pipeline);
  if (!pipe.ok()) return pipe.status();
  const dataset::Manifest& manifest = (*dataset)->manifest();
  auto bound = (*pipe)->Bind(InputSchema(manifest),
                             spec.raw ? pipeline::BindMode::kRendered
                                      : pipeline::BindMode::kOutput);
  if (absl::IsFailedPrecondition(bound.status())) return bound.status();
  if (!bound.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline '", spec.pipeline, "' cannot run on dataset '",
                     spec.dataset, "': ", bound.status().message()));
  }
  OpenPlan p;
  if (spec.raw) {
    auto formatted = (*pipe)->Bind(InputSchema(manifest));
    if (!formatted.ok()) return formatted.status();
    p.formatted = *std::move(formatted);
  }
  dataset::SamplerOptions so;
  so.num_samples = (*dataset)->num_samples();
  so.seed = spec.seed;
  so.batch_size = spec.batch_size;
  so.rank = spec.rank;
  so.world_size = spec.world_size;
  so.drop_last = spec.drop_last;
  so.ra_reps = spec.ra_reps;
  absl::StatusOr<dataset::Sampler> sampler = dataset::Sampler::Create(so);
  if (!sampler.ok()) return sampler.status();
  const uint64_t steps = sampler->StepsPerEpoch();
  if (steps == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", spec.rank, " of ", spec.world_size, " gets no batch of ",
        spec.batch_size, " from dataset '", spec.dataset, "' (",
        so.num_samples, " samples", spec.drop_last ? ", drop_last" : "",
        ")"));
  }
  if (spec.start_step >= steps ||
      (spec.epochs != 0 && spec.start_epoch > spec.epochs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start position (epoch ", spec.start_epoch, ", step ", spec.start_step,
        ") is outside the stream: ", steps, " steps per epoch, ", spec.epochs,
        " epochs"));
  }
  if (spec.end_epoch != 0 || spec.end_step != 0) {
    if (spec.end_step >= steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "end position (epoch ", spec.end_epoch, ", step ", spec.end_step,
          ") is outside its epoch: ", steps, " steps per epoch"));
    }
    // At the end is fine (a client that reconnects after the last batch
    // gets an empty stream); before it is a mistake.
    if (spec.end_epoch < spec.start_epoch ||
        (spec.end_epoch == spec.start_epoch &&
         spec.end_step < spec.start_step)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "end position (epoch ", spec.end_epoch, ", step ", spec.end_step,
          ") is before the start (epoch ", spec.start_epoch, ", step ",
          spec.start_step, ")"));
    }
  }

  const uint64_t batch_bytes =
      BatchLayout((*bound)->slots(), spec.batch_size).Capacity();
  if (batch_bytes > limits.max_batch_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", spec.batch_size, " is ", FormatBytes(batch_bytes),
        ", over the bound max_batch_bytes=",
        FormatBytes(limits.max_batch_bytes)));
  }
  const uint32_t prefetch =
      spec.prefetch == 0 ? limits.default_prefetch : spec.prefetch;
  const uint32_t window =
      StreamSession::Window(prefetch, spec.client_holds, spec.hold);

  p.request.bytes = batch_bytes * window;
  p.request.peer = spec.peer.empty() ? "local" : spec.peer;
  p.request.job_id = spec.job_id;
  p.request.rank = spec.rank;
  p.request.plan = JobPlan{spec.dataset,
                           spec.pipeline,
                           spec.seed,
                           spec.batch_size,
                           spec.world_size,
                           spec.drop_last,
                           so.num_samples,
                           spec.ra_reps,
                           manifest.content_digest.empty()
                               ? dataset::ManifestDigest(manifest)
                               : manifest.content_digest,
                           (*pipe)->definition()};
  p.request.weight = spec.weight;
  p.request.what = absl::StrCat("this stream (", window, " batches of ",
                                FormatBytes(batch_bytes), ")");
  p.window = window;
  p.batch_bytes = batch_bytes;
  Stream::Options& o = p.stream;
  o.spec = spec;
  o.spec.prefetch = prefetch;
  o.catalog = std::move(catalog);
  o.dataset = *dataset;
  o.pipeline = *std::move(bound);
  o.sampler = *std::move(sampler);
  o.on_corrupt = limits.on_corrupt;
  return p;
}

}  // namespace stoker::service
