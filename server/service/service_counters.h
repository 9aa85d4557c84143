// ServiceCounters: what the StreamService counts across streams, for
// GetStats, Prometheus and `stoker top`: the cumulative counters of each
// label set (dataset, pipeline, job, transport; counters.h), the streams
// and requests that ended with each status code, and the streams that
// asked to share and built alone. DatasetHealthOf reads the damage each
// dataset of a catalog found.
//
// Thread-safe: one lock guards the maps and tallies; a StreamCounters it
// hands out is thread-safe on its own.
#ifndef STOKER_SERVER_SERVICE_SERVICE_COUNTERS_H_
#define STOKER_SERVER_SERVICE_SERVICE_COUNTERS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/dataset.h"
#include "server/service/catalog.h"
#include "server/service/counters.h"
#include "server/service/stream_spec.h"

namespace stoker::service {

// A dataset of a catalog, the shards found damaged in it (none while it is
// healthy), and, for one served while staging, what its reads from the
// source came to.
struct DatasetHealth {
  std::string dataset;
  std::vector<dataset::ShardDamage> damage;
  std::optional<dataset::RemoteReadStats> source;
};

// Every dataset of `catalog`, in name order.
std::vector<DatasetHealth> DatasetHealthOf(const Catalog& catalog);

class ServiceCounters {
 public:
  // Label sets kept apart at most; job ids past it share the job "_other",
  // so that the metrics' cardinality stays bounded whatever clients send.
  static constexpr size_t kMaxCounterKeys = 1024;

  // The counters of `spec`'s label set, made on first use.
  std::shared_ptr<StreamCounters> For(const StreamSpec& spec);
  // Every label set seen since start.
  std::vector<std::pair<CounterKey, std::shared_ptr<const StreamCounters>>>
  All() const;

  // A stream or request ended with `code`.
  void RecordError(absl::StatusCode code);
  // By status code since start (index: absl::StatusCode).
  std::array<int64_t, 17> Errors() const;

  // A stream that asked to share builds its own batches.
  void RecordShareFallback();
  uint64_t share_fallbacks() const;

 private:
  mutable absl::Mutex mu_;
  std::map<CounterKey, std::shared_ptr<StreamCounters>> counters_
      ABSL_GUARDED_BY(mu_);
  std::array<int64_t, 17> errors_ ABSL_GUARDED_BY(mu_){};
  uint64_t share_fallbacks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_SERVICE_COUNTERS_H_
