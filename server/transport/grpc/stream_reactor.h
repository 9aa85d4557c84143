// StreamReactor: one Stream RPC over gRPC's callback API.
//
// The reactor never blocks a gRPC thread. It reads the open request, then
// keeps one read pending for acknowledgements and at most one write in
// flight. Pump() moves the stream forward whenever something changes (a
// batch finished, a write completed, an ack arrived, a buffer came back):
// it hands the stream empty buffers while fewer than `prefetch` batches are
// unacknowledged, and writes finished batches in order.
//
// A batch goes out as two slices, the message prefix and the batch buffer
// itself, so its payload is never copied on the daemon side. gRPC returns the
// buffer to the stream's BufferPool when it lets go of the slice.
//
// Thread-safe: reactions and stream callbacks arrive on any thread. Deletes
// itself in OnDone.
#ifndef STOKER_SERVER_TRANSPORT_GRPC_STREAM_REACTOR_H_
#define STOKER_SERVER_TRANSPORT_GRPC_STREAM_REACTOR_H_

#include <chrono>
#include <memory>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/service/stream_service.h"
#include "server/transport/grpc/buffer_pool.h"

namespace stoker::transport {

class StreamReactor
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `service` outlives every RPC (the server is shut down first).
  explicit StreamReactor(service::StreamService* service);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void HandleOpen(const grpc::ByteBuffer& request);
  void Pump();
  void FinishOnce(const grpc::Status& status);

  service::StreamService* const service_;

  grpc::ByteBuffer in_;  // Used by one read at a time.

  absl::Mutex mu_;
  std::shared_ptr<service::Stream> stream_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<BufferPool> buffers_ ABSL_GUARDED_BY(mu_);
  uint32_t prefetch_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t unacked_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);  // Valid until OnWriteDone.
  // When the batch being written was handed to gRPC (unset for the header).
  std::optional<std::chrono::steady_clock::time_point> batch_write_started_
      ABSL_GUARDED_BY(mu_);
  // A header waiting to be written before the first batch.
  std::unique_ptr<grpc::ByteBuffer> pending_header_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_GRPC_STREAM_REACTOR_H_
