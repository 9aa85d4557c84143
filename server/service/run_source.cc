#include "server/service/run_source.h"

#include <cstring>
#include <utility>

namespace stoker::service {

void RunSource::Take(StreamSlot* slot, std::shared_ptr<const ReadyBatch> batch,
                     bool shared, bool lend) {
  ReadyBatch ready;
  ready.epoch = slot->epoch;
  ready.step = slot->step;
  ready.sample_ids = batch->sample_ids;
  ready.skipped_ids = batch->skipped_ids;
  ready.sample_reps = batch->sample_reps;
  ready.skipped_reps = batch->skipped_reps;
  ready.tensors = batch->tensors;
  ready.bytes = batch->bytes;
  ready.shared = shared;
  if (lend) {
    slot->buffer = std::make_unique<LentBatchBuffer>(std::move(batch),
                                                     std::move(slot->buffer));
  } else {
    slot->buffer->BeforeWrite();
    std::memcpy(slot->buffer->data(), batch->buffer->data(), batch->bytes);
  }
  slot->delivered = std::move(ready);
}

}  // namespace stoker::service
