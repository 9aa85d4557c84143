// The model behind `stoker top`: turns two GetStats snapshots taken some
// time apart into rates per stream and per job, a per-stage breakdown, and a
// verdict: which part bounds the rate, and what to change. Pure functions
// over plain values, so every verdict is testable from synthetic inputs.
//
// How the verdict is reached (Diagnose):
//
//   1. Nothing moved in the interval                      -> idle.
//   2. The consumer waited less than 10% of its time for
//      batches (stall share = wait / (wait + busy))       -> consumer-bound:
//      data is ready when the trainer asks; the training loop is the limit.
//   3. Otherwise the data path is the limit. Per sample, the workers spend
//      read + decode + augment + collate seconds, `threads` at a time; the
//      transport spends `transfer` seconds, one batch at a time per stream.
//      If the transport hands over fewer samples per second than the
//      workers can build                                   -> transport-bound.
//   4. If reading takes as long as all the CPU work, or the dataset is on a
//      network filesystem or spinning disk and reads take a quarter of the
//      worker time                                         -> storage-bound.
//   5. Otherwise                                           -> cpu-bound.
//
// Thread-compatible.
#ifndef STOKER_CLIENT_CLI_TOP_VIEW_H_
#define STOKER_CLIENT_CLI_TOP_VIEW_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "stoker/v1/stoker.pb.h"

namespace stoker::cli {

enum class Bottleneck { kIdle, kConsumer, kStorage, kCpu, kTransport };

// "idle", "consumer-bound", "storage-bound", "cpu-bound", "transport-bound".
const char* BottleneckName(Bottleneck b);

// The stall share under which the consumer, not the data, is the limit.
inline constexpr double kStallThreshold = 0.1;

// Seconds each stage took per delivered sample over the interval. Transfer is
// timed per batch and spread over the batch's samples.
struct StageTimes {
  double read = 0;
  double decode = 0;
  double augment = 0;
  double collate = 0;
  double transfer = 0;
  double Worker() const { return read + decode + augment + collate; }
  double Total() const { return Worker() + transfer; }
};

struct VerdictInput {
  double samples_per_second = 0;
  double acks_per_second = 0;
  double stall_share = 0;  // wait / (wait + busy) over the interval.
  StageTimes per_sample;
  int worker_threads = 0;
  double worker_busy_ratio = 0;  // 0..1 over the interval.
  std::string transport = "grpc";
  // "local", "network" or "rotational": where the dataset lives.
  std::string storage_kind = "local";
};

struct Verdict {
  Bottleneck bottleneck = Bottleneck::kIdle;
  std::string reason;  // What the numbers show.
  std::string change;  // What to do about it; empty when idle.
};

Verdict Diagnose(const VerdictInput& in);

struct StreamRow {
  uint64_t id = 0;
  std::string dataset, pipeline, job_id, transport;
  uint32_t rank = 0, world_size = 1, prefetch = 0;
  double samples_per_second = 0;
  double batches_per_second = 0;
  double bytes_per_second = 0;
  uint32_t queued = 0, building = 0;
  double stall_share = -1;  // -1: no ack in the interval.
  // Every count of GetStats' `counts` map, per second over the interval:
  // a count the daemon adds shows here (and in --json) with no edit.
  std::map<std::string, double> per_second;
};

struct JobRow {
  std::string dataset, pipeline, job_id, transport;
  int streams = 0;  // Open now.
  double samples_per_second = 0;
  double bytes_per_second = 0;
  double stall_share = -1;
  uint64_t corrupt = 0;  // Corrupt samples skipped in the interval.
  StageTimes per_sample;
  Verdict verdict;
  std::map<std::string, double> per_second;  // As StreamRow's.
};

struct StorageRow {
  std::string dataset, path, fstype, kind, advice;
};

// A dataset the daemon found damaged while serving: the streams that reach
// the damaged shards end with DATA_LOSS.
struct DamagedDatasetRow {
  std::string dataset;
  std::vector<std::string> shards;  // "shard-00001.lmdb: key 7: SIGBUS ..."
};

// A helper daemon of this one (docs/remote-design.md), over the interval.
struct HelperRow {
  std::string address;
  bool up = false;
  uint32_t open_chunks = 0;
  double allowance = 0;  // Chunks it may have open now.
  double samples_per_second = 0;
  // Of all samples the daemon delivered in the interval, the share it built.
  double share = 0;
  double wire_bytes_per_sample = -1;  // -1: no sample in the interval.
  // This daemon's time copying (and normalizing) them, per sample.
  double copy_seconds_per_sample = -1;
  uint64_t failures = 0;  // In the interval.
  uint64_t late = 0;      // Its batches that held a consumer up.
  std::string last_error;
};

// A dataset with a `source`: its copy onto local disk (docs/storage.md).
struct StagingRow {
  std::string dataset;
  std::string state;  // starting, waiting, copying, complete, failed, stopped
  bool servable = false;
  double percent = 0;
  double bytes_per_second = 0;  // Fetched over the interval.
  double eta_seconds = -1;      // At the interval's rate; -1: unknown.
  uint64_t remote_records = 0;  // Read by range from the source, in all.
  std::string error;
};

// A GPU that cuda_ipc streams deliver to, over the interval.
struct GpuRow {
  std::string gpu;            // UUID.
  uint64_t device_bytes = 0;  // Held now (rings, staging).
  double batches_per_second = 0;
  double h2d_bytes_per_second = 0;  // Of wall time.
  double h2d_gbps = -1;             // While copying; -1: no copy.
  double h2d_ms_per_batch = -1;
  double kernel_ms_per_batch = -1;  // The format stage on the device.
};

struct TopView {
  double interval_seconds = 0;
  double uptime_seconds = 0;
  int worker_threads = 0;
  double worker_busy_ratio = 0;
  uint64_t queued_tasks = 0;
  uint64_t memory_reserved = 0, memory_budget = 0;
  uint32_t open_streams = 0;
  int open_jobs = 0;
  std::vector<StreamRow> streams;
  std::vector<JobRow> jobs;  // Label sets active in the interval or open.
  std::vector<StorageRow> storage;
  std::vector<HelperRow> helpers;  // Empty without `helpers` in the config.
  std::vector<StagingRow> staging;  // Datasets with a `source`.
  std::vector<GpuRow> gpus;  // GPUs cuda_ipc streams used since start.
  bool placing_remote = false;     // New chunks go to helpers now.
  std::vector<DamagedDatasetRow> damaged;  // Unhealthy datasets only.
  std::map<std::string, uint64_t> errors;  // Cumulative, by code.
  Verdict verdict;                         // Over all jobs together.
};

// The view of the interval from `before` to `after` (two GetStats replies).
TopView BuildView(const v1::DaemonStats& before, const v1::DaemonStats& after);

nlohmann::json ToJson(const TopView& view);

}  // namespace stoker::cli

#endif  // STOKER_CLIENT_CLI_TOP_VIEW_H_
