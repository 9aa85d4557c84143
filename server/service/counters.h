// What streams count. Each count is one entry of kCounts: that entry makes
// the stream's own value and the cumulative value of its label set
// (dataset, pipeline, job, transport), each under its `name` in GetStats'
// `counts` maps, in `stoker top` (per second, and in --json) and in the
// close log, and its Prometheus counter family. A new count takes two
// edits: its entry here and the place that counts it (counts_->Add in
// stream.cc, chunk_source.cc, or a delivery's BatchEncoder);
// tests/metrics/counts_everywhere_test.cc
// checks that every entry reaches all four.
//
// A stream counts once, into its own Counts, which it got by joining its
// label set's StreamCounters. A label set reads as what its closed streams
// counted (folded in when a stream lets go of its Counts) plus what its open
// streams count now, so a Prometheus counter never goes backwards when a
// stream closes.
//
// Thread-safe.
#ifndef STOKER_SERVER_SERVICE_COUNTERS_H_
#define STOKER_SERVER_SERVICE_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/service/latency_histogram.h"

namespace stoker::service {

enum class Count {
  kSamples,
  kBatches,
  kBytes,
  kSkipped,
  kSharedBatches,
  kAcks,
  kWaitNs,
  kBusyNs,
  kRemoteBatches,
  kRemoteRebuilt,
  kCompressedBatches,
  kCompressNs,
  kSourceRecords,
  kSourceBytes,
  kSourceWaitNs,
};

struct CountDef {
  Count count;
  const char* name;    // In GetStats' `counts` maps.
  const char* metric;  // The Prometheus family.
  const char* help;
  double unit;  // What one counted unit is in the exported value.
};

inline constexpr CountDef kCounts[] = {
    {Count::kSamples, "samples", "stoker_samples_total",
     "Samples delivered to consumers.", 1},
    {Count::kBatches, "batches", "stoker_batches_total",
     "Batches delivered to consumers.", 1},
    {Count::kBytes, "bytes", "stoker_bytes_total",
     "Bytes of batch payload delivered, as sent (compressed where it was).",
     1},
    {Count::kSkipped, "skipped", "stoker_corrupt_samples_total",
     "Corrupt samples (bad checksum or undecodable) left out of batches.", 1},
    {Count::kSharedBatches, "shared_batches", "stoker_shared_batches_total",
     "Batches delivered from a shared preprocessing run that built them once "
     "for several streams (included in stoker_batches_total).",
     1},
    {Count::kAcks, "acks", "stoker_acks_total",
     "Batches acknowledged by consumers.", 1},
    {Count::kWaitNs, "wait_seconds", "stoker_consumer_wait_seconds_total",
     "Time consumers waited for batches (the data stall), as they report it "
     "on each ack.",
     1e-9},
    {Count::kBusyNs, "busy_seconds", "stoker_consumer_busy_seconds_total",
     "Time consumers spent between their requests (training steps). Stall "
     "share = rate(wait) / (rate(wait) + rate(busy)).",
     1e-9},
    {Count::kRemoteBatches, "remote_batches", "stoker_remote_batches_total",
     "Batches built by a helper daemon and delivered from here (included in "
     "stoker_batches_total).",
     1},
    {Count::kRemoteRebuilt, "remote_rebuilt",
     "stoker_remote_rebuilt_batches_total",
     "Batches placed on a helper that did not deliver them (it failed, "
     "stalled or was refused), built here instead.",
     1},
    {Count::kCompressedBatches, "compressed_batches",
     "stoker_compressed_batches_total",
     "Batches sent zstd-compressed (OpenStream.compression); "
     "stoker_bytes_total counts their bytes as sent.",
     1},
    {Count::kCompressNs, "compress_seconds", "stoker_compress_seconds_total",
     "Time workers spent compressing batches, including those that did not "
     "get smaller and went as they were.",
     1e-9},
    {Count::kSourceRecords, "source_records", "stoker_source_records_total",
     "Records read from the dataset's source by byte range, because their "
     "shard was not staged on the local disk yet.",
     1},
    {Count::kSourceBytes, "source_bytes", "stoker_source_record_bytes_total",
     "Bytes of the records counted in stoker_source_records_total.", 1},
    {Count::kSourceWaitNs, "source_wait_seconds",
     "stoker_source_wait_seconds_total",
     "Time reads of records from the source waited for it (0 for a record "
     "its prefetch had brought in).",
     1e-9},
};
inline constexpr int kNumCounts = sizeof(kCounts) / sizeof(kCounts[0]);

// Values read, indexed by Count.
struct CountValues {
  std::array<int64_t, kNumCounts> v{};
  int64_t operator[](Count c) const { return v[static_cast<int>(c)]; }
  int64_t& operator[](Count c) { return v[static_cast<int>(c)]; }
  // In the exported unit (seconds for the *Ns counts).
  double Exported(Count c) const {
    return static_cast<double>((*this)[c]) * kCounts[static_cast<int>(c)].unit;
  }
};

class Counts {
 public:
  void Add(Count c, int64_t n) {
    v_[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  CountValues Read() const;

 private:
  std::array<std::atomic<int64_t>, kNumCounts> v_{};
};

// A counter of a daemon component other than streams (a transport's), as
// it is exported: a Prometheus counter family of its own, without labels.
struct NamedCount {
  std::string metric;
  std::string help;
  double value = 0;
  // A present value rather than a count since start.
  bool gauge = false;
  // Its labels; entries of one metric with different labels are one family.
  std::vector<std::pair<std::string, std::string>> labels;
};

// The stages a sample or batch goes through, for latency histograms.
enum class Stage { kRead, kDecode, kAugment, kCollate, kTransfer };
inline constexpr int kNumStages = 5;
const char* StageName(Stage stage);

struct CounterKey {
  std::string dataset;
  std::string pipeline;
  std::string job;  // The job id, or empty.
  std::string transport;
  bool operator<(const CounterKey& o) const {
    return std::tie(dataset, pipeline, job, transport) <
           std::tie(o.dataset, o.pipeline, o.job, o.transport);
  }
};

// The counts and stage latencies of one label set.
class StreamCounters {
 public:
  // Counts for one stream, part of this label set until dropped, when they
  // fold into it.
  static std::shared_ptr<Counts> Join(std::shared_ptr<StreamCounters> set);
  CountValues Read() const;

  void Observe(Stage stage, int64_t ns) {
    latency[static_cast<int>(stage)].Observe(ns);
  }
  std::array<LatencyHistogram, kNumStages> latency;

 private:
  void Fold(const Counts* counts);

  mutable absl::Mutex mu_;
  CountValues folded_ ABSL_GUARDED_BY(mu_);
  std::set<const Counts*> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_COUNTERS_H_
