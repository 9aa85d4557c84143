#include "stream_call.h"

#include <utility>

#include <grpcpp/support/proto_buffer_reader.h>

namespace stoker {

MessagePool::Ptr MessagePool::Get() {
  std::unique_ptr<Batch::Message> message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      message = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (message == nullptr) message = std::make_unique<Batch::Message>();
  message->pool = shared_from_this();
  return Ptr(message.release());
}

void MessagePool::Recycle(Batch::Message* message) {
  std::unique_ptr<Batch::Message> owned(message);
  if (owned == nullptr) return;
  owned->Release();
  const std::shared_ptr<MessagePool> pool = std::move(owned->pool);
  if (pool == nullptr) return;
  std::lock_guard<std::mutex> lock(pool->mu_);
  if (pool->idle_.size() < kMaxIdle) pool->idle_.push_back(std::move(owned));
}

void Batch::MessageReturn::operator()(Message* message) const {
  MessagePool::Recycle(message);
}

void Stream::Call::Open(grpc::ChannelInterface* channel) {
  // The generated stub's method, made with the factory the stub uses, but
  // reading raw buffers, which Read parses into recycled messages.
  static const grpc::internal::RpcMethod kStream(
      "/stoker.v1.Stoker/Stream", grpc::internal::RpcMethod::BIDI_STREAMING);
  rw.reset(grpc::internal::ClientReaderWriterFactory<
           v1::StreamRequest, grpc::ByteBuffer>::Create(channel, kStream,
                                                        &context));
}

bool ParseStreamMessage(grpc::ByteBuffer* buffer,
                        v1::StreamResponse* response) {
  // Merging into a cleared batch, unlike parsing (which deletes the oneof's
  // batch first), keeps the payload string and its capacity.
  if (response->has_batch()) {
    response->mutable_batch()->Clear();
  } else {
    response->Clear();
  }
  grpc::ProtoBufferReader reader(buffer);
  return response->MergeFromBoundedZeroCopyStream(
      &reader, static_cast<int>(buffer->Length()));
}

bool Stream::Call::Read(v1::StreamResponse* response) {
  grpc::ByteBuffer buffer;
  if (!rw->Read(&buffer)) return false;
  if (!ParseStreamMessage(&buffer, response)) {
    parse_failed = true;
    context.TryCancel();
    return false;
  }
  return true;
}

void Stream::Call::StartReader() {
  reader = std::thread([this] {
    for (;;) {
      MessagePool::Ptr message = pool->Get();
      const bool ok = Read(&message->response);
      std::lock_guard<std::mutex> lock(mu);
      if (!ok) {
        read_done = true;
        cv.notify_all();
        return;
      }
      ready.push_back(std::move(message));
      cv.notify_all();
    }
  });
}

absl::StatusOr<MessagePool::Ptr> Stream::Call::Pop() {
  if (!reader.joinable()) {
    if (read_done) return nullptr;
    MessagePool::Ptr message = pool->Get();
    if (channel != nullptr) {
      absl::StatusOr<bool> got = channel->Read(&message->response);
      if (!got.ok()) return got.status();
      if (*got) return message;
    } else if (Read(&message->response)) {
      return message;
    }
    read_done = true;
    return nullptr;
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [this] { return !ready.empty() || read_done; });
  if (ready.empty()) return nullptr;
  auto message = std::move(ready.front());
  ready.pop_front();
  return message;
}

void Stream::Call::Send(const v1::StreamRequest& request) {
  if (channel != nullptr) {
    channel->Write(request);
  } else {
    rw->Write(request);
  }
}

grpc::Status Stream::Call::End(bool cancel) {
  if (cancel) {
    // Closing our end of the side channel is what ends the stream on the
    // daemon's side, and unblocks a read().
    if (channel != nullptr) channel->Shutdown();
    context.TryCancel();
  }
  if (reader.joinable()) reader.join();
  finished = true;
  grpc::Status status = rw->Finish();
  if (parse_failed) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "stokerd sent a stream message this client cannot "
                        "parse (a different protocol version?)");
  }
  return status;
}

}  // namespace stoker
