#include "server/service/admission.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace stoker::service {
namespace {

// How often a waiting Admit polls its caller's cancellation.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

// The first field on which `want` differs from `have`, as "name (have vs
// want)", or empty.
std::string PlanDifference(const JobPlan& have, const JobPlan& want) {
  const auto diff = [](absl::string_view field, const auto& a, const auto& b) {
    return absl::StrCat(field, " ", a, " (fixed by the job's first stream); "
                        "this stream asks for ", b);
  };
  if (have.dataset != want.dataset) {
    return diff("dataset", absl::StrCat("'", have.dataset, "'"),
                absl::StrCat("'", want.dataset, "'"));
  }
  if (have.pipeline != want.pipeline) {
    return diff("pipeline", absl::StrCat("'", have.pipeline, "'"),
                absl::StrCat("'", want.pipeline, "'"));
  }
  if (have.world_size != want.world_size) {
    return diff("world_size", have.world_size, want.world_size);
  }
  if (have.batch_size != want.batch_size) {
    return diff("batch_size", have.batch_size, want.batch_size);
  }
  if (have.seed != want.seed) return diff("seed", have.seed, want.seed);
  if (have.drop_last != want.drop_last) {
    return diff("drop_last", have.drop_last ? "true" : "false",
                want.drop_last ? "true" : "false");
  }
  if (have.ra_reps != want.ra_reps) {
    return diff("ra_reps", have.ra_reps, want.ra_reps);
  }
  if (have.num_samples != want.num_samples) {
    return absl::StrCat("dataset '", want.dataset, "' had ", have.num_samples,
                        " samples when the job began and has ",
                        want.num_samples,
                        " now (it was reloaded): the epoch plan would differ");
  }
  if (have.dataset_digest != want.dataset_digest) {
    return absl::StrCat(
        "dataset '", want.dataset,
        "' holds other samples than when the job began (digest ",
        have.dataset_digest, ", now ", want.dataset_digest,
        "; it was reloaded): the ranks would mix two datasets");
  }
  if (have.pipeline_definition != want.pipeline_definition) {
    return absl::StrCat("pipeline '", want.pipeline,
                        "' was redefined since the job began (it was "
                        "reloaded): the ranks would mix two pipelines");
  }
  return "";
}

struct BytesReservation {
  std::function<void()> release;
  ~BytesReservation() { release(); }
};

}  // namespace

std::string FormatBytes(uint64_t n) {
  if (n >= (1ull << 30)) return absl::StrFormat("%.1f GiB", n / 1073741824.0);
  if (n >= (1ull << 20)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  return absl::StrCat(n, " bytes");
}

PoolGroup::PoolGroup(pipeline::WorkerPool* pool, double weight)
    : pool_(pool), id_(pool->AddGroup(weight)) {}

PoolGroup::~PoolGroup() { pool_->RemoveGroup(id_); }

void PoolGroup::SetWeight(double weight) { pool_->SetWeight(id_, weight); }

StreamTicket::StreamTicket(std::shared_ptr<Admission> admission, uint64_t id,
                           const AdmitRequest& request, double weight,
                           std::shared_ptr<PoolGroup> group)
    : admission_(std::move(admission)),
      id_(id),
      bytes_(request.bytes),
      peer_(request.peer),
      job_id_(request.job_id),
      rank_(request.rank),
      weight_(weight),
      group_(std::move(group)) {}

StreamTicket::~StreamTicket() {
  absl::MutexLock lock(&admission_->mu_);
  admission_->ReleaseLocked(id_, bytes_, peer_, job_id_, rank_);
}

Admission::Admission(pipeline::WorkerPool* pool, AdmissionLimits limits)
    : pool_(pool), limits_(limits) {}

absl::Status Admission::CheckCountsLocked(const AdmitRequest& request,
                                          bool waiting) const {
  // A waiting request is counted already: it must not count against itself.
  const uint32_t self = waiting ? 1 : 0;
  const uint32_t others = open_streams_ + waiting_ - self;
  if (others >= limits_.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        open_streams_, " streams are open",
        waiting_ - self == 0
            ? ""
            : absl::StrCat(" and ", waiting_ - self, " wait to open"),
        ", the bound max_streams=", limits_.max_streams));
  }
  const auto peer = per_peer_.find(request.peer);
  const uint32_t peer_open = peer == per_peer_.end() ? 0 : peer->second.open;
  const uint32_t peer_waiting =
      (peer == per_peer_.end() ? 0 : peer->second.waiting) - self;
  if (peer_open + peer_waiting >= limits_.max_streams_per_peer) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "peer ", request.peer, " has ", peer_open, " streams open",
        peer_waiting == 0
            ? ""
            : absl::StrCat(" and ", peer_waiting, " waiting to open"),
        ", the bound max_streams_per_peer=", limits_.max_streams_per_peer));
  }
  return absl::OkStatus();
}

absl::Status Admission::CheckLocked(const AdmitRequest& request, bool waiting,
                                    bool* retry) const {
  *retry = false;
  if (absl::Status s = CheckCountsLocked(request, waiting); !s.ok()) return s;
  if (!request.job_id.empty()) {
    const auto job = jobs_.find(request.job_id);
    if (job != jobs_.end()) {
      const std::string diff = PlanDifference(job->second.plan, request.plan);
      if (!diff.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job '", request.job_id, "': ", diff,
            "; every stream of a job must agree (use another job_id for a "
            "different plan)"));
      }
      if (job->second.ranks.count(request.rank) != 0) {
        *retry = true;
        return absl::FailedPreconditionError(absl::StrCat(
            "job '", request.job_id, "': rank ", request.rank, " of ",
            request.plan.world_size,
            " already has an open stream; each rank may have one (a rank "
            "that reconnects is admitted once its old stream has ended)"));
      }
    }
  }
  if (bytes_reserved_ + request.bytes > limits_.memory_budget) {
    *retry = request.bytes <= limits_.memory_budget;
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory_budget ", FormatBytes(limits_.memory_budget), " has ",
        FormatBytes(bytes_reserved_), " in use; ", request.what, " asks for ",
        FormatBytes(request.bytes), ": lower prefetch or batch_size"));
  }
  return absl::OkStatus();
}

double Admission::WeightLocked(const std::string& job_id,
                               double requested) const {
  const auto it = job_weights_.find(job_id);
  if (!job_id.empty() && it != job_weights_.end()) return it->second;
  return requested > 0 ? requested : 1.0;
}

void Admission::AddBytesLocked(uint64_t bytes) {
  bytes_reserved_ += bytes;
  bytes_high_water_ = std::max(bytes_high_water_, bytes_reserved_);
}

absl::StatusOr<std::shared_ptr<StreamTicket>> Admission::Admit(
    const AdmitRequest& request, const WaitContext& wait) {
  absl::MutexLock lock(&mu_);
  bool waiting = false;
  for (;;) {
    absl::StatusOr<std::shared_ptr<StreamTicket>> got =
        TryAdmitLocked(request, &waiting);
    if (got.ok() || !waiting) return got;
    const absl::Time now = absl::Now();
    if (now >= wait.deadline) {
      StopWaitingLocked(request);
      return got.status();
    }
    if (wait.cancelled && wait.cancelled()) {
      StopWaitingLocked(request);
      return absl::CancelledError(absl::StrCat(
          "the client gave up while waiting: ", got.status().message()));
    }
    freed_.WaitWithDeadline(&mu_, std::min(wait.deadline, now + kCancelPoll));
  }
}

absl::StatusOr<std::shared_ptr<StreamTicket>> Admission::TryAdmit(
    const AdmitRequest& request, bool* waiting) {
  absl::MutexLock lock(&mu_);
  return TryAdmitLocked(request, waiting);
}

void Admission::StopWaiting(const AdmitRequest& request) {
  absl::MutexLock lock(&mu_);
  StopWaitingLocked(request);
}

void Admission::SetListener(std::function<void()> listener) {
  absl::MutexLock lock(&mu_);
  listener_ = std::move(listener);
}

void Admission::StopWaitingLocked(const AdmitRequest& request) {
  waiting_ -= 1;
  auto it = per_peer_.find(request.peer);
  if (--it->second.waiting == 0 && it->second.open == 0) per_peer_.erase(it);
}

void Admission::SignalFreedLocked() {
  freed_.SignalAll();
  if (listener_) listener_();
}

absl::StatusOr<std::shared_ptr<StreamTicket>> Admission::TryAdmitLocked(
    const AdmitRequest& request, bool* waiting) {
  absl::Status refused;
  bool retry = false;
  if (shut_down_) {
    refused = absl::UnavailableError("stokerd is shutting down");
  } else {
    refused = CheckLocked(request, *waiting, &retry);
  }
  if (!refused.ok()) {
    // A request that waits counts against the stream bounds while it does.
    if (retry && !*waiting) {
      waiting_ += 1;
      per_peer_[request.peer].waiting += 1;
    } else if (!retry && *waiting) {
      StopWaitingLocked(request);
    }
    *waiting = retry;
    return refused;
  }
  if (*waiting) StopWaitingLocked(request);
  *waiting = false;
  const uint64_t id = next_id_++;
  AddBytesLocked(request.bytes);
  open_streams_ += 1;
  per_peer_[request.peer].open += 1;
  double weight = WeightLocked(request.job_id, request.weight);
  std::shared_ptr<PoolGroup> group;
  if (request.job_id.empty()) {
    group = std::make_shared<PoolGroup>(pool_, weight);
  } else {
    auto [it, inserted] = jobs_.try_emplace(request.job_id);
    Job& job = it->second;
    if (inserted) {
      job.plan = request.plan;
      job.weight = weight;
    }
    job.ranks[request.rank] = id;
    weight = job.weight;
    group = job.group.lock();
    if (group == nullptr) {
      group = std::make_shared<PoolGroup>(pool_, job.weight);
      job.group = group;
    }
  }
  return std::make_shared<StreamTicket>(shared_from_this(), id, request,
                                        weight, std::move(group));
}

absl::StatusOr<std::shared_ptr<void>> Admission::Reserve(
    uint64_t bytes, absl::string_view what) {
  absl::MutexLock lock(&mu_);
  if (bytes_reserved_ + bytes > limits_.memory_budget) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory_budget ", FormatBytes(limits_.memory_budget), " has ",
        FormatBytes(bytes_reserved_), " in use; ", what, " asks for ",
        FormatBytes(bytes)));
  }
  AddBytesLocked(bytes);
  auto reservation = std::make_shared<BytesReservation>();
  reservation->release = [self = shared_from_this(), bytes] {
    absl::MutexLock lock(&self->mu_);
    self->bytes_reserved_ -= bytes;
    self->SignalFreedLocked();
  };
  return std::shared_ptr<void>(std::move(reservation));
}

void Admission::ReleaseLocked(uint64_t id, uint64_t bytes,
                              const std::string& peer,
                              const std::string& job_id, uint32_t rank) {
  bytes_reserved_ -= bytes;
  open_streams_ -= 1;
  if (auto it = per_peer_.find(peer); it != per_peer_.end()) {
    if (--it->second.open == 0 && it->second.waiting == 0) per_peer_.erase(it);
  }
  if (!job_id.empty()) {
    auto job = jobs_.find(job_id);
    if (job != jobs_.end()) {
      auto r = job->second.ranks.find(rank);
      if (r != job->second.ranks.end() && r->second == id) {
        job->second.ranks.erase(r);
      }
      if (job->second.ranks.empty()) jobs_.erase(job);
    }
  }
  SignalFreedLocked();
}

void Admission::SetJobWeights(std::map<std::string, double> weights) {
  absl::MutexLock lock(&mu_);
  job_weights_ = std::move(weights);
  for (auto& [id, job] : jobs_) {
    const auto it = job_weights_.find(id);
    if (it == job_weights_.end()) continue;
    job.weight = it->second;
    if (auto group = job.group.lock()) group->SetWeight(job.weight);
  }
}

void Admission::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  SignalFreedLocked();
}

Admission::Stats Admission::GetStats() const {
  absl::MutexLock lock(&mu_);
  return Stats{open_streams_, waiting_, bytes_reserved_, bytes_high_water_,
               limits_.memory_budget, static_cast<uint32_t>(jobs_.size())};
}

}  // namespace stoker::service
