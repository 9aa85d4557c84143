// PlanOpen: what opening a stream needs, worked out from the request and
// the catalog alone: every bound of the request checked, the dataset and
// pipeline found, the pipeline bound once, the sampler made, the prefetch
// depth granted and the window it gives, the bytes to reserve, and the
// Stream::Options the stream will be built from. Nothing is reserved,
// started or registered: admission (admission.h) and building the stream
// are the StreamService's.
//
// A function of its arguments: no threads, no clock, no server; the tests
// (tests/service/open_planner_test.cc) call it on a catalog of their own.
#ifndef STOKER_SERVER_SERVICE_OPEN_PLANNER_H_
#define STOKER_SERVER_SERVICE_OPEN_PLANNER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "server/pipeline/pipeline.h"
#include "server/service/admission.h"
#include "server/service/catalog.h"
#include "server/service/stream.h"
#include "server/service/stream_spec.h"

namespace stoker::service {

// The bounds a request must keep (ServiceOptions has the daemon's).
struct OpenLimits {
  uint32_t max_batch_size = 4096;
  uint32_t max_prefetch = 64;
  uint64_t max_batch_bytes = 1ull << 30;
  // The depth of a stream that asks for none (prefetch 0).
  uint32_t default_prefetch = 4;
  OnCorrupt on_corrupt = OnCorrupt::kSkip;
};

// The longest dataset, pipeline or job name a request may carry.
inline constexpr size_t kMaxNameBytes = 256;

struct OpenPlan {
  // spec (with the prefetch depth granted), catalog, dataset, pipeline,
  // sampler and on_corrupt; the StreamService adds where the stream runs
  // (pool, group), what it counts into and its placer.
  Stream::Options stream;
  // For a stream that sends the uint8 rendering (StreamSpec::raw): its
  // pipeline bound in full, which says what the format stage writes.
  std::shared_ptr<const pipeline::BoundPipeline> formatted;
  // Batches unacknowledged at most (StreamSession::Window).
  uint32_t window = 0;
  uint64_t batch_bytes = 0;  // One batch's buffer.
  AdmitRequest request;      // window * batch_bytes, the job's plan.

  const StreamSpec& spec() const { return stream.spec; }
};

// InvalidArgument naming the field or bound of `spec` that is outside
// `limits` (batch size, prefetch, hold, rank, weight, name lengths): the
// checks that need no catalog.
absl::Status CheckBounds(const StreamSpec& spec, const OpenLimits& limits);

// CheckBounds, then: NotFound for an unknown dataset or pipeline; InvalidArgument naming the
// field or bound a request breaks (or why the pipeline cannot run on the
// dataset); FailedPrecondition from the bind (an image format this build
// cannot decode).
absl::StatusOr<OpenPlan> PlanOpen(const StreamSpec& spec,
                                  std::shared_ptr<const Catalog> catalog,
                                  const OpenLimits& limits);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_OPEN_PLANNER_H_
