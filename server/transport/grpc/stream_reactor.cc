#include "server/transport/grpc/stream_reactor.h"

#include <optional>

#include "server/transport/grpc/convert.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

StreamReactor::StreamReactor(service::StreamService* service,
                             FdServer* fd_server)
    : service_(service), fd_server_(fd_server) {
  StartRead(&in_);
}

grpc::Status StreamReactor::CheckTransport(v1::Transport transport) const {
  switch (transport) {
    case v1::TRANSPORT_UNSPECIFIED:
    case v1::TRANSPORT_GRPC:
      return grpc::Status::OK;
    case v1::TRANSPORT_SHM:
      if (fd_server_ != nullptr) return grpc::Status::OK;
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "the shm transport needs the daemon's unix socket "
                          "(listen.unix), which this daemon does not have; "
                          "use transport grpc");
    default:
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          "this daemon has no cuda_ipc transport: it was built without GPU "
          "delivery; use shm (same node) or grpc");
  }
}

void StreamReactor::OnReadDone(bool ok) {
  bool opened;
  {
    absl::MutexLock lock(&mu_);
    opened = stream_ != nullptr;
  }
  if (!ok) {
    // The client half-closed or left. After the open, writes go on (a
    // client that left is cancelled); before it, there is nothing to serve.
    if (!opened) {
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "the stream closed before its `open` message"));
    }
    return;
  }
  if (!opened) {
    HandleOpen(in_);
  } else {
    v1::StreamRequest request;
    if (!ParseFromByteBuffer(in_, &request) || !request.has_ack()) {
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "after open, a stream accepts only acks"));
      return;
    }
    std::shared_ptr<service::Stream> stream;
    std::shared_ptr<Delivery> delivery;
    {
      absl::MutexLock lock(&mu_);
      if (unacked_ > 0) --unacked_;
      stream = stream_;
      delivery = delivery_;
    }
    const v1::Position& acked = request.ack().position();
    delivery->Acked(acked.epoch(), acked.step());
    stream->RecordAck(request.ack().wait_seconds(),
                      request.ack().busy_seconds());
    Pump();
  }
  absl::MutexLock lock(&mu_);
  if (!finished_) StartRead(&in_);
}

void StreamReactor::HandleOpen(const grpc::ByteBuffer& raw) {
  v1::StreamRequest request;
  if (!ParseFromByteBuffer(raw, &request) || !request.has_open()) {
    FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "the first message of a stream must be `open`"));
    return;
  }
  const v1::OpenStream& open = request.open();
  if (grpc::Status s = CheckTransport(open.transport()); !s.ok()) {
    FinishOnce(s);
    return;
  }
  absl::StatusOr<service::OpenedStream> opened =
      service_->Open(ToSpec(open));
  if (!opened.ok()) {
    FinishOnce(ToGrpcStatus(opened.status()));
    return;
  }
  std::shared_ptr<service::Stream> stream = opened->stream;
  v1::StreamResponse response;
  v1::StreamHeader* header = response.mutable_header();
  header->set_num_samples(stream->num_samples());
  header->set_steps_per_epoch(stream->steps_per_epoch());
  header->set_samples_per_epoch(stream->samples_per_epoch());
  header->set_prefetch(opened->prefetch);
  *header->mutable_start() = open.start();
  for (const pipeline::TensorSpec& spec : stream->layout().per_sample()) {
    ToProto(spec, header->add_outputs());
  }
  std::shared_ptr<Delivery> delivery;
  if (open.transport() == v1::TRANSPORT_SHM) {
    auto ring = ShmRing::Create(opened->window, opened->batch_bytes,
                                opened->ticket);
    if (!ring.ok()) {
      stream->Cancel();
      FinishOnce(ToGrpcStatus(ring.status()));
      return;
    }
    delivery = std::make_shared<ShmDelivery>(*std::move(ring), fd_server_);
  } else {
    delivery = std::make_shared<GrpcDelivery>(std::make_shared<BufferPool>(
        opened->batch_bytes, opened->window, opened->ticket));
  }
  delivery->DescribeIn(header);
  {
    absl::MutexLock lock(&mu_);
    stream_ = stream;
    delivery_ = delivery;
    prefetch_ = opened->window;
    pending_header_ =
        std::make_unique<grpc::ByteBuffer>(SerializeToByteBuffer(response));
  }
  stream->SetReadyCallback([this] { Pump(); });
  delivery->SetReturnHook([this] { Pump(); });
  Pump();
}

void StreamReactor::Pump() {
  std::optional<grpc::Status> finish;
  bool start_write = false;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || stream_ == nullptr) return;
    // Start as many batches as flow control allows.
    while (unacked_ < prefetch_ && stream_->HasMore()) {
      std::unique_ptr<service::BatchBuffer> buffer = delivery_->Take();
      if (buffer == nullptr) break;
      if (!stream_->Fill(std::move(buffer))) break;
      ++unacked_;
    }
    if (writing_) return;
    if (pending_header_ != nullptr) {
      out_ = std::move(*pending_header_);
      pending_header_.reset();
      writing_ = start_write = true;
    } else if (std::optional<service::ReadyBatch> batch =
                   stream_->TakeReady()) {
      out_ = delivery_->Encode(*std::move(batch));
      writing_ = start_write = true;
      batch_write_started_ = std::chrono::steady_clock::now();
    } else if (stream_->Done() &&
               (!stream_->status().ok() ||
                ((unacked_ == 0 || !delivery_->EndAfterLastAck()) &&
                 delivery_->ClientAttached()))) {
      // An shm stream whose batches all fit in its ring can be done before
      // the client fetched the ring: it waits for that (or a cancel).
      finish = ToGrpcStatus(stream_->status());
    }
  }
  if (finish.has_value()) {
    FinishOnce(*finish);
    return;
  }
  // Outside the lock: a write may complete, and call back, on this thread.
  // Only this call may touch out_ until OnWriteDone, since it set writing_.
  if (start_write) StartWrite(&out_);
}

void StreamReactor::OnWriteDone(bool ok) {
  // Dropping the written message may release its payload slice, which
  // returns the buffer and calls Pump(): never do that under mu_.
  grpc::ByteBuffer written;
  std::optional<grpc::Status> deferred;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    written.Swap(&out_);
    if (batch_write_started_.has_value()) {
      stream_->RecordTransfer(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now() - *batch_write_started_)
              .count());
      batch_write_started_.reset();
    }
    deferred.swap(deferred_finish_);
  }
  written.Clear();
  if (deferred.has_value()) {
    Finish(*deferred);
    return;
  }
  if (!ok) {
    // The client is gone; OnCancel or OnDone follows.
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    return;
  }
  Pump();
}

void StreamReactor::OnCancel() {
  FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
}

void StreamReactor::FinishOnce(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    if (!status.ok()) {
      service_->RecordError(
          static_cast<absl::StatusCode>(status.error_code()));
    }
    // A write is in flight, or Pump() is about to start one outside the
    // lock: finishing now could let OnDone delete this reactor under that
    // StartWrite. OnWriteDone finishes instead.
    if (writing_) {
      deferred_finish_ = status;
      return;
    }
  }
  Finish(status);
}

void StreamReactor::OnDone() {
  std::shared_ptr<service::Stream> stream;
  std::shared_ptr<Delivery> delivery;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
    delivery = std::move(delivery_);
  }
  // After these return, no callback can reach this reactor.
  if (stream != nullptr) stream->Cancel();
  if (delivery != nullptr) delivery->ClearReturnHook();
  delete this;
}

}  // namespace stoker::transport
