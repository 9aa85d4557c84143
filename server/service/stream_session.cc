#include "server/service/stream_session.h"

#include <algorithm>

namespace stoker::service {

uint32_t StreamSession::Window(uint32_t prefetch, bool client_holds,
                               uint32_t hold) {
  return prefetch + (client_holds ? std::max<uint32_t>(1, hold) : 0);
}

void StreamSession::Fill(BatchSource& source, BufferSlots& slots) {
  while (in_flight() < window_ && source.HasMore()) {
    std::unique_ptr<BatchBuffer> buffer = slots.Take();
    if (buffer == nullptr) return;
    if (!source.Fill(std::move(buffer))) return;
    ++started_;
  }
}

StreamSession::Action StreamSession::Next(BatchSource& source,
                                          BufferSlots& slots, bool can_send,
                                          bool can_end) {
  Fill(source, slots);
  Action action;
  if (can_send) {
    action.batch = source.TakeReady();
    if (action.batch.has_value()) {
      // A source never has more ready than were started.
      if (started_ > 0) --started_;
      const std::pair<uint64_t, uint64_t> at{action.batch->epoch,
                                             action.batch->step};
      sent_.insert(at);
      if (!first_sent_.has_value()) first_sent_ = at;
      last_sent_ = at;
      action.kind = Action::kSend;
      return action;
    }
  }
  if (source.Done()) {
    action.status = source.status();
    if (!action.status.ok() || (can_end && slots.MayEnd(in_flight()))) {
      action.kind = Action::kFinish;
    }
  }
  return action;
}

StreamSession::AckResult StreamSession::OnAck(uint64_t epoch, uint64_t step) {
  const std::pair<uint64_t, uint64_t> at{epoch, step};
  if (sent_.erase(at) == 1) return AckResult::kFreed;
  if (!first_sent_.has_value() || at < *first_sent_ || at > *last_sent_) {
    return AckResult::kNeverSent;
  }
  return AckResult::kRepeated;
}

}  // namespace stoker::service
