#include "stream_call.h"

#include <utility>

namespace stoker {

void Stream::Call::StartReader() {
  reader = std::thread([this] {
    for (;;) {
      auto message = std::make_unique<Batch::Message>();
      const bool ok = rw->Read(&message->response);
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

absl::StatusOr<std::unique_ptr<Batch::Message>> Stream::Call::Pop() {
  if (!reader.joinable()) {
    if (read_done) return nullptr;
    auto message = std::make_unique<Batch::Message>();
    if (channel != nullptr) {
      absl::StatusOr<bool> got = channel->Read(&message->response);
      if (!got.ok()) return got.status();
      if (*got) return message;
    } else if (rw->Read(&message->response)) {
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
  return rw->Finish();
}

}  // namespace stoker
