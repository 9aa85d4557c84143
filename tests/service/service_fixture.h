// Fixtures for the service core's unit tests: a catalog of a small typed
// dataset built in a temp dir, Stream::Options made by the planner, and a
// consumer that drives a Stream as its session would, with no transport
// and no server.
//
// Thread-safe: the functions share no state.
#ifndef STOKER_TESTS_SERVICE_SERVICE_FIXTURE_H_
#define STOKER_TESTS_SERVICE_SERVICE_FIXTURE_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/admission.h"
#include "server/service/catalog.h"
#include "server/service/counters.h"
#include "server/service/stream.h"

namespace stoker::service::fixture {

// The typed dataset (testing::MakeTypedSamples): sample i has label i and
// (5 * i) % 13 tokens.
inline constexpr int kSamples = 26;

// A catalog of the typed dataset of `num_samples` written into `dir`, as
// "typed", with the pipelines
//   "all"        every field but the caption, as it is;
//   "short_skip" tokens cut at 5 rows: a longer sample is skipped;
//   "short_fail" the same, but a longer sample fails the stream.
absl::StatusOr<std::shared_ptr<const Catalog>> MakeTypedCatalog(
    const std::string& dir, int num_samples = kSamples);

// A stream request on the typed dataset.
StreamSpec TypedSpec(const std::string& pipeline, uint32_t batch_size,
                     uint64_t epochs = 1);

// The options PlanOpen makes for `spec`, running on `pool` in a group of
// its own, counting into fresh counters.
absl::StatusOr<Stream::Options> OptionsFor(
    const StreamSpec& spec, std::shared_ptr<const Catalog> catalog,
    pipeline::WorkerPool* pool, OnCorrupt on_corrupt = OnCorrupt::kSkip);

// The "label" tensor of `batch`: the ids of its samples, as written.
std::vector<int64_t> Labels(const ReadyBatch& batch);

// What a consumer got from a stream.
struct Drained {
  std::vector<ReadyBatch> batches;
  absl::Status status;  // The stream's at its end; DeadlineExceeded if none.
};

// Consumes `stream` as a session with `window` heap buffers would: starts
// batches while the stream HasMore and fewer than `window` are not yet
// taken, takes them in order as they are ready, until the stream is Done
// or `max_batches` were taken. Gives up after 30 s.
Drained Drain(Stream& stream, uint32_t window,
              size_t max_batches = std::numeric_limits<size_t>::max());

}  // namespace stoker::service::fixture

#endif  // STOKER_TESTS_SERVICE_SERVICE_FIXTURE_H_
