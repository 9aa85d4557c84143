#include "server/rpc/stream_reactor.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "server/rpc/convert.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::rpc {

StreamReactor::StreamReactor(service::StreamService* service,
                             service::Opener* opener,
                             const transport::Transports* transports,
                             grpc::CallbackServerContext* context,
                             std::string peer)
    : service_(service),
      opener_(opener),
      transports_(transports),
      deadline_(context->deadline()),
      peer_(std::move(peer)) {
  StartRead(&in_);
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
    // The next read starts once the stream is open (OnOpened).
    HandleOpen(in_);
    return;
  }
  v1::StreamRequest request;
  if (!ParseFromByteBuffer(in_, &request)) {
    FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "a stream request that does not parse"));
    return;
  }
  TakeAcks(request);
  absl::MutexLock lock(&mu_);
  if (!finished_) StartRead(&in_);
}

void StreamReactor::TakeAcks(const v1::StreamRequest& request) {
  if (!(request.has_ack() || request.has_acks())) {
    FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "after open, a stream accepts only acks"));
    return;
  }
  // One Ack, or several in an AckList (header field ack_list).
  const v1::Ack* single = request.has_ack() ? &request.ack() : nullptr;
  const int count = single != nullptr ? 1 : request.acks().acks_size();
  std::shared_ptr<transport::Delivery> delivery;
  std::vector<const v1::Ack*> known;
  const v1::Ack* never_sent = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (stream_ == nullptr) return;  // Done: OnDone took it.
    for (int i = 0; i < count; ++i) {
      const v1::Ack& ack = single != nullptr ? *single : request.acks().acks(i);
      // Counted in the same critical section that opens the window: once
      // it is open, a worker's Pump may send the next batch, and whoever
      // sees that batch must also see this ack counted. A repeated ack
      // opens nothing and counts no stall.
      const service::StreamSession::AckResult result =
          session_->OnAck(ack.position().epoch(), ack.position().step());
      if (result == service::StreamSession::AckResult::kFreed) {
        stream_->RecordAck(ack.wait_seconds(), ack.busy_seconds());
        known.push_back(&ack);
      } else if (result == service::StreamSession::AckResult::kNeverSent &&
                 never_sent == nullptr) {
        never_sent = &ack;
      }
    }
    delivery = delivery_;
  }
  // Only a batch in flight is let go.
  for (const v1::Ack* ack : known) {
    delivery->Acked(ack->position().epoch(), ack->position().step());
  }
  if (never_sent != nullptr) {
    // A client that acks what it never received has lost count: waiting
    // for it would hang both sides.
    FinishOnce(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("ack of position (epoch ", never_sent->position().epoch(),
                     ", step ", never_sent->position().step(),
                     "), which this stream has not sent")));
    return;
  }
  Pump();
}

void StreamReactor::HandleOpen(const grpc::ByteBuffer& raw) {
  v1::StreamRequest request;
  if (!ParseFromByteBuffer(raw, &request) || !request.has_open()) {
    FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "the first message of a stream must be `open`"));
    return;
  }
  const v1::OpenStream& open = request.open();
  absl::StatusOr<transport::Transport*> transport = transports_->Find(open.transport());
  if (!transport.ok()) {
    FinishOnce(ToGrpcStatus(transport.status()));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    opening_ = true;
  }
  // While opening_ is set, FinishOnce only records a cancel, so gRPC cannot
  // finish the call under the opener; the reference keeps this reactor's
  // memory valid until the opener is done with it.
  refs_.fetch_add(1);
  service::StreamSpec spec = transport::ToSpec(open);
  spec.transport = transport::Transports::Name(open.transport());
  // A client that copies each batch out as it arrives keeps none in the
  // transport's memory: its ring needs no slots for held batches.
  spec.client_holds = (*transport)->client_holds() && !open.copy_out();
  if ((*transport)->formats_on_delivery()) spec.raw = true;
  spec.peer = peer_;
  absl::Time deadline = absl::FromChrono(deadline_);
  if (open.open_timeout() > 0) {
    deadline =
        std::min(deadline, absl::Now() + absl::Seconds(open.open_timeout()));
  }
  opener_->Submit(
      std::move(spec), deadline, [this] { return cancel_requested_.load(); },
      [this, open, transport = *transport](
          absl::StatusOr<service::OpenedStream> opened) {
        OnOpened(open, transport, std::move(opened));
        Unref();
      });
}

absl::StatusOr<std::shared_ptr<transport::Delivery>> StreamReactor::SetUp(
    const v1::OpenStream& open, transport::Transport* transport,
    const service::OpenedStream& opened, v1::StreamResponse* response) {
  const service::Stream& stream = *opened.stream;
  v1::StreamHeader* header = response->mutable_header();
  header->set_num_samples(stream.num_samples());
  header->set_steps_per_epoch(stream.steps_per_epoch());
  header->set_samples_per_epoch(stream.samples_per_epoch());
  header->set_prefetch(opened.prefetch);
  header->set_shared(opened.shared);
  header->set_share_refused(opened.share_refused);
  header->set_ack_list(true);
  *header->mutable_start() = open.start();
  for (const tensor::TensorSpec& t : stream.layout().per_sample()) {
    transport::ToProto(t, header->add_outputs());
  }
  transport::OpenContext context{open, opened, {}};
  context.hooks.connected = [this] { Pump(); };
  context.hooks.request = [this](const v1::StreamRequest& r) { TakeAcks(r); };
  context.hooks.lost = [this](const absl::Status& s) {
    FinishOnce(ToGrpcStatus(s));
  };
  absl::StatusOr<std::shared_ptr<transport::Delivery>> delivery =
      transport->Open(context);
  if (delivery.ok()) (*delivery)->DescribeIn(header);
  return delivery;
}

void StreamReactor::OnOpened(const v1::OpenStream& open, transport::Transport* transport,
                             absl::StatusOr<service::OpenedStream> opened) {
  v1::StreamResponse response;
  absl::StatusOr<std::shared_ptr<transport::Delivery>> delivery =
      opened.ok() ? SetUp(open, transport, *opened, &response)
                  : opened.status();
  if (!delivery.ok()) {
    if (opened.ok()) opened->stream->Cancel();
    absl::MutexLock lock(&mu_);
    opening_ = false;
  } else {
    // Before the lock (they take the callbacks' locks, which are held while
    // a callback runs Pump): until stream_ is set below, Pump does nothing,
    // and no batch is started before it.
    opened->stream->SetEncoder((*delivery)->encoder());
    opened->stream->SetReadyCallback([this] { Pump(); });
    (*delivery)->SetReturnHook([this] { Pump(); });
    absl::MutexLock lock(&mu_);
    stream_ = opened->stream;
    delivery_ = *delivery;
    channel_ = delivery_->side_channel();
    session_.emplace(opened->window);
    pending_header_ =
        std::make_unique<grpc::ByteBuffer>(SerializeToByteBuffer(response));
    opening_ = false;
    if (!cancel_requested_) StartRead(&in_);
  }
  if (cancel_requested_) {
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  } else if (!delivery.ok()) {
    FinishOnce(ToGrpcStatus(delivery.status()));
  } else {
    Pump();
  }
}

void StreamReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

void StreamReactor::Pump() {
  std::optional<grpc::Status> finish;
  bool start_write = false;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || stream_ == nullptr) return;
    if (pending_header_ != nullptr && !writing_) {
      out_ = std::move(*pending_header_);
      pending_header_.reset();
      writing_ = start_write = true;
    }
    // On a side channel, once the client is there (it connects after
    // reading the header), every finished batch goes out at once, whatever
    // the call is writing. Otherwise batches go on the call, one at a time,
    // after the header.
    const bool noticing = channel_ != nullptr && channel_->connected();
    const bool on_call = channel_ == nullptr && pending_header_ == nullptr;
    for (;;) {
      if (!noticing && writing_) {
        session_->Fill(*stream_, *delivery_);
        break;
      }
      service::StreamSession::Action action = session_->Next(
          *stream_, *delivery_, /*can_send=*/noticing || on_call,
          /*can_end=*/!writing_ && (channel_ == nullptr || noticing));
      if (action.kind == service::StreamSession::Action::kFinish) {
        finish = ToGrpcStatus(action.status);
        break;
      }
      if (action.kind == service::StreamSession::Action::kWait) break;
      if (noticing) {
        const auto started = std::chrono::steady_clock::now();
        channel_->Send(delivery_->HandOver(*std::move(action.batch)).message);
        stream_->RecordTransfer(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - started)
                .count());
        continue;
      }
      out_ = Encode(delivery_->HandOver(*std::move(action.batch)));
      writing_ = start_write = true;
      batch_write_started_ = std::chrono::steady_clock::now();
      break;
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
    FinishOnce(grpc::Status(
        grpc::StatusCode::CANCELLED,
        "a write to the client failed: the client left or its connection "
        "closed"));
    return;
  }
  Pump();
}

void StreamReactor::OnCancel() {
  FinishOnce(grpc::Status(
      grpc::StatusCode::CANCELLED,
      "the client cancelled the call, left, or its connection closed"));
}

void StreamReactor::FinishOnce(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (opening_) {
      cancel_requested_ = true;
      return;
    }
    finished_ = true;
    finished_with_ =
        absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                     status.error_message());
    // The client reads its side channel to the end, then the status.
    if (channel_ != nullptr) channel_->End();
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
  std::shared_ptr<transport::Delivery> delivery;
  transport::SideChannel* channel;
  absl::Status finished_with;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
    delivery = std::move(delivery_);
    channel = std::exchange(channel_, nullptr);
    finished_with = finished_with_;
  }
  // After these return, no callback can reach this reactor. A call that
  // ended early (the client cancelled or left) closes its stream with why.
  if (stream != nullptr) stream->Cancel(finished_with);
  if (delivery != nullptr) delivery->ClearReturnHook();
  if (channel != nullptr) channel->Detach();
  Unref();
}

}  // namespace stoker::rpc
