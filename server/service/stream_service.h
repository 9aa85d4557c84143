// StreamService: admits, opens and tracks streams. Transport-free: the gRPC
// adapter converts requests to StreamSpec and statuses back, nothing more.
//
// Admission checks every bound of a request (batch size, prefetch depth,
// bytes per batch, open streams) and reserves the stream's buffers against
// the memory budget. The reservation lives in a StreamTicket that the
// transport keeps as long as it holds any of the stream's buffers, so the
// budget counts memory exactly while it is in use.
//
// Thread-safe.
#ifndef STOKER_SERVER_SERVICE_STREAM_SERVICE_H_
#define STOKER_SERVER_SERVICE_STREAM_SERVICE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/catalog.h"
#include "server/service/stream.h"

namespace stoker::service {

struct ServiceOptions {
  uint32_t max_batch_size = 4096;
  uint32_t max_prefetch = 64;
  uint32_t default_prefetch = 4;
  // prefetch: auto. When set, the depth of a stream that asks for none is
  // read from here at open (the autotuner writes it) instead of
  // default_prefetch. Must outlive the service.
  const std::atomic<uint32_t>* tuned_prefetch = nullptr;
  uint32_t max_streams = 256;
  uint64_t max_batch_bytes = 1ull << 30;
  uint64_t memory_budget = 2ull << 30;
  OnCorrupt on_corrupt = OnCorrupt::kSkip;
};

// Counters shared by the service and its tickets. Shared because a ticket
// can outlive the call that opened its stream (gRPC may hold a stream's last
// buffer a moment longer).
struct Admission {
  absl::Mutex mu;
  uint64_t bytes_reserved ABSL_GUARDED_BY(mu) = 0;
  uint32_t open_streams ABSL_GUARDED_BY(mu) = 0;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::weak_ptr<Stream>> streams ABSL_GUARDED_BY(mu);
};

// A stream's admission: releases its bytes and its stream count when
// destroyed.
class StreamTicket {
 public:
  StreamTicket(std::shared_ptr<Admission> admission, uint64_t id,
               uint64_t bytes);
  ~StreamTicket();
  StreamTicket(const StreamTicket&) = delete;
  StreamTicket& operator=(const StreamTicket&) = delete;
  uint64_t bytes() const { return bytes_; }

 private:
  const std::shared_ptr<Admission> admission_;
  const uint64_t id_;
  const uint64_t bytes_;
};

struct OpenedStream {
  std::shared_ptr<Stream> stream;
  std::shared_ptr<StreamTicket> ticket;  // Shared by the stream's buffers.
  uint32_t prefetch = 0;                 // The prefetch depth granted.
  // Batches unacknowledged at most, and buffers the transport may hold:
  // prefetch, plus the consumer's held batches for shm.
  uint32_t window = 0;
  size_t batch_bytes = 0;
};

// What the metrics layer sees of one open stream.
struct StreamSnapshot {
  uint64_t id = 0;
  StreamSpec spec;
  uint64_t steps_per_epoch = 0;
  StreamStats stats;
};

// Told of each stream's open and close, one call each (stokerd logs them).
// OnOpen runs on the opening thread after admission; OnClose on whichever
// thread lets go of the stream last, once no task of it is left, with its
// final counts. No lock of the service is held; both must be quick.
class StreamObserver {
 public:
  virtual ~StreamObserver() = default;
  virtual void OnOpen(const StreamSnapshot& stream, uint64_t reserved_bytes) = 0;
  virtual void OnClose(const StreamSnapshot& stream, const absl::Status& status,
                       double seconds_open) = 0;
};

class StreamService {
 public:
  // `pool` must outlive the service and every stream it opens.
  StreamService(pipeline::WorkerPool* pool, ServiceOptions options,
                std::shared_ptr<const Catalog> catalog);

  std::shared_ptr<const Catalog> catalog() const;
  void SetCatalog(std::shared_ptr<const Catalog> catalog);

  // NotFound for an unknown dataset or pipeline; InvalidArgument naming the
  // field or bound a request breaks; ResourceExhausted naming the budget or
  // stream limit; Unavailable once shutting down.
  absl::StatusOr<OpenedStream> Open(const StreamSpec& spec);

  // Refuses new streams and ends the open ones with Unavailable, so clients
  // reconnect at their position once the daemon is back.
  void Shutdown();

  struct Stats {
    uint32_t open_streams = 0;
    uint64_t bytes_reserved = 0;
    uint64_t memory_budget = 0;
  };
  Stats GetStats() const;
  // Every open stream, in the order they opened.
  std::vector<StreamSnapshot> Snapshot() const;
  // The cumulative counters of every label set seen since start.
  std::vector<std::pair<CounterKey, std::shared_ptr<const StreamCounters>>>
  Counters() const;
  // `observer` (or nullptr) must outlive every stream opened after this.
  void SetObserver(StreamObserver* observer) { observer_ = observer; }
  // Counts a stream or request that ended with this status.
  void RecordError(absl::StatusCode code);
  // Errors by status code since start (index: absl::StatusCode).
  std::array<int64_t, 17> Errors() const;

 private:
  static constexpr size_t kMaxCounterKeys = 1024;

  absl::Status Validate(const StreamSpec& spec) const;
  std::shared_ptr<StreamCounters> CountersFor(const StreamSpec& spec);

  // Constant after construction.
  pipeline::WorkerPool* const pool_;
  const ServiceOptions options_;
  const std::shared_ptr<Admission> admission_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const Catalog> catalog_ ABSL_GUARDED_BY(mu_);
  std::map<CounterKey, std::shared_ptr<StreamCounters>> counters_
      ABSL_GUARDED_BY(mu_);
  std::array<int64_t, 17> errors_ ABSL_GUARDED_BY(mu_){};
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<StreamObserver*> observer_{nullptr};
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_SERVICE_H_
