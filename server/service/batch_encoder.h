// BatchEncoder: how a transport that sends batch bytes in its messages
// encodes them on the wire (the grpc transport: zstd, as
// OpenStream.compression asks). The delivery owns it (transport.h,
// Delivery::encoder); the stream only runs it, on the worker that finished
// a batch the stream built itself (on its tasks or from a helper's copy),
// so that encoding costs the workers, in parallel, and not the thread that
// sends. A shared run's lent batches are never encoded.
//
// Thread-safe: Encode runs on many workers at once.
#ifndef STOKER_SERVER_SERVICE_BATCH_ENCODER_H_
#define STOKER_SERVER_SERVICE_BATCH_ENCODER_H_

#include <cstdint>

#include "server/service/batch.h"
#include "server/service/counters.h"

namespace stoker::service {

class BatchEncoder {
 public:
  virtual ~BatchEncoder() = default;
  // Whether Encode reads `behind` (computing it takes the stream's lock).
  virtual bool adaptive() const = 0;
  // Encodes `batch`, whose first batch->bytes bytes are at `data`, in
  // place, or leaves it as it is; sets batch->compression and bytes when it
  // encodes. `behind`: an earlier finished batch of the stream still waits
  // to be taken, i.e. sending has fallen behind building. Counts its work
  // into `counts` (Count::kCompressNs, kCompressedBatches).
  virtual void Encode(ReadyBatch* batch, uint8_t* data, bool behind,
                      Counts* counts) const = 0;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_BATCH_ENCODER_H_
