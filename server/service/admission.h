// Admission: the daemon-wide bookkeeping behind every open stream.
//
// It holds, under one lock:
//   - the bytes reserved against `memory_budget` and their high-water mark;
//   - the streams open in total and per peer;
//   - the jobs: streams that carry the same job id share one epoch plan. The
//     first stream of a job fixes the plan (dataset, pipeline, seed, batch
//     size, world size, drop_last, ra_reps, and the dataset's size) and the job's pool
//     group and weight; each rank has at most one open stream.
//
// Admit() waits, up to the request's deadline, for budget to free up or for
// a rank's previous stream to end (a rank that reconnects at once may race
// the end of its old stream); then it refuses with the bound named. A
// request that waits counts against max_streams and max_streams_per_peer as
// if it were open, so that the waiting opens are bounded too.
//
// What it grants lives in a StreamTicket that the transport keeps as long as
// it holds any of the stream's buffers, so the budget counts memory exactly
// while it is in use. Thread-safe.
#ifndef STOKER_SERVER_SERVICE_ADMISSION_H_
#define STOKER_SERVER_SERVICE_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/pipeline/worker_pool.h"

namespace stoker::service {

// A worker-pool group, removed from the pool when the last holder lets go.
// The streams of one job share one, so the job gets one fair share.
class PoolGroup {
 public:
  PoolGroup(pipeline::WorkerPool* pool, double weight);
  ~PoolGroup();
  PoolGroup(const PoolGroup&) = delete;
  PoolGroup& operator=(const PoolGroup&) = delete;

  pipeline::WorkerPool::GroupId id() const { return id_; }
  void SetWeight(double weight);
  void Submit(pipeline::WorkerPool::Task task) {
    pool_->Submit(id_, std::move(task));
  }

 private:
  pipeline::WorkerPool* const pool_;
  const pipeline::WorkerPool::GroupId id_;
};

// What every stream of a job must agree on.
struct JobPlan {
  std::string dataset;
  std::string pipeline;
  uint64_t seed = 0;
  uint32_t batch_size = 0;
  uint32_t world_size = 1;
  bool drop_last = false;
  uint64_t num_samples = 0;  // The dataset's size when the job began.
  uint32_t ra_reps = 1;
  // Which samples the dataset held when the job began: its pack's content
  // digest (dataset/content_digest.h), or for a pack made before pack
  // stored one, its manifest digest. A reload that points the name at
  // another pack changes it.
  std::string dataset_digest;
  // The pipeline's definition when the job began (Pipeline::definition):
  // a reload that redefines it changes it.
  std::string pipeline_definition;
};

struct AdmissionLimits {
  uint32_t max_streams = 256;
  uint32_t max_streams_per_peer = 64;
  uint64_t memory_budget = 2ull << 30;
};

// One stream's request for admission.
struct AdmitRequest {
  uint64_t bytes = 0;   // Reserved against the memory budget.
  std::string peer;     // Who opens it, e.g. "uid:1000" or "ip:10.0.0.5".
  std::string job_id;   // Empty: a job of its own.
  uint32_t rank = 0;
  JobPlan plan;
  double weight = 1.0;  // Used when the stream starts its job.
  std::string what;     // Describes the request in refusals.
};

// How long Admit may wait, and how it learns that the caller gave up.
struct WaitContext {
  absl::Time deadline = absl::InfinitePast();  // The past: do not wait.
  std::function<bool()> cancelled;             // Optional; polled.
};

class Admission;

// A granted admission: releases its bytes, its stream and peer counts and
// its rank when destroyed.
class StreamTicket {
 public:
  StreamTicket(std::shared_ptr<Admission> admission, uint64_t id,
               const AdmitRequest& request, double weight,
               std::shared_ptr<PoolGroup> group);
  ~StreamTicket();
  StreamTicket(const StreamTicket&) = delete;
  StreamTicket& operator=(const StreamTicket&) = delete;

  uint64_t id() const { return id_; }
  uint64_t bytes() const { return bytes_; }
  // The pool group the stream's tasks run in (its job's).
  const std::shared_ptr<PoolGroup>& group() const { return group_; }
  // The job's fair-share weight (from the config, or its first request).
  double weight() const { return weight_; }

 private:
  const std::shared_ptr<Admission> admission_;
  const uint64_t id_;
  const uint64_t bytes_;
  const std::string peer_;
  const std::string job_id_;
  const uint32_t rank_;
  const double weight_;
  const std::shared_ptr<PoolGroup> group_;
};

class Admission : public std::enable_shared_from_this<Admission> {
 public:
  struct Stats {
    uint32_t open_streams = 0;
    uint32_t waiting_opens = 0;
    uint64_t bytes_reserved = 0;
    uint64_t bytes_high_water = 0;
    uint64_t memory_budget = 0;
    uint32_t jobs = 0;
  };

  Admission(pipeline::WorkerPool* pool, AdmissionLimits limits);

  // ResourceExhausted naming the bound (max_streams, max_streams_per_peer,
  // memory_budget with the bytes in use and asked for); FailedPrecondition
  // naming the field a job's stream disagrees on, or the rank already open;
  // Cancelled if the caller gave up; Unavailable after Shutdown().
  absl::StatusOr<std::shared_ptr<StreamTicket>> Admit(
      const AdmitRequest& request, const WaitContext& wait);
  // One try, no wait. `*waiting` says whether `request` is counted as
  // waiting: on the way in (a retry), and on the way out: set when the
  // refusal may go away by waiting, so the caller may try again later
  // (and must call StopWaiting if it gives up); cleared otherwise.
  absl::StatusOr<std::shared_ptr<StreamTicket>> TryAdmit(
      const AdmitRequest& request, bool* waiting);
  // A request counted as waiting no longer is.
  void StopWaiting(const AdmitRequest& request);
  // Called under this object's lock whenever something is freed, and at
  // Shutdown(); see StreamService::SetAdmissionListener.
  void SetListener(std::function<void()> listener);

  // Reserves bytes that no stream owns (a shared run's buffers); no wait.
  // The reservation ends when the returned handle is destroyed.
  absl::StatusOr<std::shared_ptr<void>> Reserve(uint64_t bytes,
                                                absl::string_view what);

  // Weights from the config by job id; a job not named keeps the weight of
  // its first stream's request. Applies to running jobs at once.
  void SetJobWeights(std::map<std::string, double> weights);

  // Refuses new admissions and wakes every waiting one.
  void Shutdown();

  Stats GetStats() const;

 private:
  friend class StreamTicket;

  struct Job {
    JobPlan plan;
    double weight = 1.0;
    std::map<uint32_t, uint64_t> ranks;  // rank -> ticket id.
    std::weak_ptr<PoolGroup> group;
  };

  // Why `request` cannot be admitted now, or OK. `retry` is set when the
  // reason may go away by waiting (budget, a rank's old stream). `waiting`:
  // the request is among those counted as waiting.
  absl::Status CheckLocked(const AdmitRequest& request, bool waiting,
                           bool* retry) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stream bounds (max_streams, max_streams_per_peer), which count the
  // waiting requests with the open streams.
  absl::Status CheckCountsLocked(const AdmitRequest& request,
                                 bool waiting) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double WeightLocked(const std::string& job_id, double requested) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked(uint64_t id, uint64_t bytes, const std::string& peer,
                     const std::string& job_id, uint32_t rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddBytesLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<StreamTicket>> TryAdmitLocked(
      const AdmitRequest& request, bool* waiting)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopWaitingLocked(const AdmitRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the waiting opens, on this thread and the listener's.
  void SignalFreedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  pipeline::WorkerPool* const pool_;
  const AdmissionLimits limits_;

  mutable absl::Mutex mu_;
  absl::CondVar freed_;  // Signalled when anything is released.
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t bytes_reserved_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_high_water_ ABSL_GUARDED_BY(mu_) = 0;
  struct PeerCount {
    uint32_t open = 0;
    uint32_t waiting = 0;
  };
  uint32_t open_streams_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t waiting_ ABSL_GUARDED_BY(mu_) = 0;  // Admits in their wait.
  std::map<std::string, PeerCount> per_peer_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> job_weights_ ABSL_GUARDED_BY(mu_);
  std::function<void()> listener_ ABSL_GUARDED_BY(mu_);
};

// "1.5 GiB", "12.0 MiB" or "100 bytes".
std::string FormatBytes(uint64_t n);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_ADMISSION_H_
