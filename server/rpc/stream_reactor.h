// StreamReactor: one Stream RPC over gRPC's callback API.
//
// The reactor never blocks a gRPC thread. It reads the open request and
// hands it to the Opener (service/opener.h), since admission may wait for
// memory budget (up to the call's deadline); then it keeps one read pending
// for acknowledgements and at most one write in flight. Pump() runs whenever
// something changes (a batch finished, a write completed, an ack arrived, a
// buffer came back) and does what the stream's StreamSession
// (service/stream_session.h) says: the session keeps the window, the order
// and the acks; the reactor only says when it can send and end, and sends.
//
// Where buffers come from and how a batch is handed over is the stream's
// Delivery, made by the transport the client asked for (transport.h); the
// reactor converts each handover to a message on the call (convert.h), or
// sends it on the delivery's side channel when it has one, which then also
// brings the acks; the call still carries the header and the final status.
//
// Thread-safe: reactions and stream callbacks arrive on any thread. Deletes
// itself once OnDone has run and the opener no longer holds it.
#ifndef STOKER_SERVER_RPC_STREAM_REACTOR_H_
#define STOKER_SERVER_RPC_STREAM_REACTOR_H_

#include <atomic>
#include <chrono>
#include <string>
#include <memory>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/service/opener.h"
#include "server/service/stream_service.h"
#include "server/service/stream_session.h"
#include "server/transport/transport.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::rpc {

class StreamReactor
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `service`, `opener` and `transports` outlive every RPC (the server is
  // shut down first). `peer` is the caller's key for per-peer limits (see
  // PeerKey).
  StreamReactor(service::StreamService* service, service::Opener* opener,
                const transport::Transports* transports,
                grpc::CallbackServerContext* context, std::string peer);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void HandleOpen(const grpc::ByteBuffer& request);
  // Takes the acks of a request after the open, from the call or the
  // side channel; finishes the call on anything else.
  void TakeAcks(const v1::StreamRequest& request);
  // Runs on the opener's thread with the outcome of the open: sets the
  // stream up on its transport and starts it, or finishes the call.
  void OnOpened(const v1::OpenStream& open, transport::Transport* transport,
                absl::StatusOr<service::OpenedStream> opened);
  // The stream's header, and its delivery on `transport`.
  absl::StatusOr<std::shared_ptr<transport::Delivery>> SetUp(
      const v1::OpenStream& open, transport::Transport* transport,
      const service::OpenedStream& opened, v1::StreamResponse* header);
  void Pump();
  void FinishOnce(const grpc::Status& status);
  // Deletes this once gRPC is done with it (OnDone) and the opener no
  // longer holds it.
  void Unref();

  service::StreamService* const service_;
  service::Opener* const opener_;
  const transport::Transports* const transports_;
  const std::chrono::system_clock::time_point deadline_;
  const std::string peer_;
  // Set when the client goes away while the open is waiting.
  std::atomic<bool> cancel_requested_{false};
  std::atomic<int> refs_{1};  // gRPC's, plus the opener's while it opens.

  grpc::ByteBuffer in_;  // Used by one read at a time.

  absl::Mutex mu_;
  std::shared_ptr<service::Stream> stream_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<transport::Delivery> delivery_ ABSL_GUARDED_BY(mu_);
  // The delivery's side channel, or null: batches go on the call.
  transport::SideChannel* channel_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The window, the order and the acks; set once the stream is open.
  std::optional<service::StreamSession> session_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // What the call finished with, for the stream's close (its log line).
  absl::Status finished_with_ ABSL_GUARDED_BY(mu_);
  bool opening_ ABSL_GUARDED_BY(mu_) = false;  // Until OnOpened() is done.
  // The status to finish with once the write in flight completes.
  std::optional<grpc::Status> deferred_finish_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);  // Valid until OnWriteDone.
  // When the batch being written was handed to gRPC (unset for the header).
  std::optional<std::chrono::steady_clock::time_point> batch_write_started_
      ABSL_GUARDED_BY(mu_);
  // A header waiting to be written before the first batch.
  std::unique_ptr<grpc::ByteBuffer> pending_header_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::rpc

#endif  // STOKER_SERVER_RPC_STREAM_REACTOR_H_
