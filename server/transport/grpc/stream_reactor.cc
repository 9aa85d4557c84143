#include "server/transport/grpc/stream_reactor.h"

#include <optional>

#include "server/transport/grpc/convert.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

StreamReactor::StreamReactor(service::StreamService* service)
    : service_(service) {
  StartRead(&in_);
}

void StreamReactor::OnReadDone(bool ok) {
  if (!ok) return;  // The client half-closed or left; writes go on.
  bool opened;
  {
    absl::MutexLock lock(&mu_);
    opened = stream_ != nullptr;
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
    {
      absl::MutexLock lock(&mu_);
      if (unacked_ > 0) --unacked_;
      stream = stream_;
    }
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
  if (open.transport() != v1::TRANSPORT_UNSPECIFIED &&
      open.transport() != v1::TRANSPORT_GRPC) {
    FinishOnce(grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "this daemon serves only the grpc transport (shm and cuda_ipc are "
        "not built in yet); ask for transport grpc"));
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
  header->set_transport(v1::TRANSPORT_GRPC);
  header->set_prefetch(opened->prefetch);
  *header->mutable_start() = open.start();
  for (const pipeline::TensorSpec& spec : stream->layout().per_sample()) {
    ToProto(spec, header->add_outputs());
  }
  auto pool = std::make_shared<BufferPool>(
      stream->layout().Bytes(stream->spec().batch_size), opened->prefetch,
      opened->ticket);
  {
    absl::MutexLock lock(&mu_);
    stream_ = stream;
    buffers_ = pool;
    prefetch_ = opened->prefetch;
    pending_header_ =
        std::make_unique<grpc::ByteBuffer>(SerializeToByteBuffer(response));
  }
  stream->SetReadyCallback([this] { Pump(); });
  pool->SetReturnHook([this] { Pump(); });
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
      std::unique_ptr<service::BatchBuffer> buffer = buffers_->Take();
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
      grpc::Slice slices[2] = {
          grpc::Slice(BatchWirePrefix(*batch)),
          buffers_->WrapAsSlice(std::move(batch->buffer), batch->bytes)};
      out_ = grpc::ByteBuffer(slices, 2);
      writing_ = start_write = true;
      batch_write_started_ = std::chrono::steady_clock::now();
    } else if (stream_->Done() &&
               (unacked_ == 0 || !stream_->status().ok())) {
      // A stream ends once the client acknowledged every batch, so its
      // last ack (and stall report) is never lost.
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
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    written.Swap(&out_);
    if (batch_write_started_.has_value()) {
      stream_->RecordTransfer(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() -
                                  *batch_write_started_)
                                  .count());
      batch_write_started_.reset();
    }
  }
  written.Clear();
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
  }
  if (!status.ok()) {
    service_->RecordError(static_cast<absl::StatusCode>(status.error_code()));
  }
  Finish(status);
}

void StreamReactor::OnDone() {
  std::shared_ptr<service::Stream> stream;
  std::shared_ptr<BufferPool> buffers;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
    buffers = std::move(buffers_);
  }
  // After these return, no callback can reach this reactor.
  if (stream != nullptr) stream->Cancel();
  if (buffers != nullptr) buffers->ClearReturnHook();
  delete this;
}

}  // namespace stoker::transport
