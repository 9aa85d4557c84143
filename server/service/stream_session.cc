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
      sent_.insert({action.batch->epoch, action.batch->step});
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

bool StreamSession::OnAck(uint64_t epoch, uint64_t step) {
  return sent_.erase({epoch, step}) == 1;
}

}  // namespace stoker::service
