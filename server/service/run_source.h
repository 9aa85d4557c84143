// RunSource: a stream's place in the SharedRun (shared_run.h) it joined.
// The stream asks the run for each batch (Request); the run answers with
// Stream::Deliver from a worker, and Take makes the run's batch the slot's:
// lent in place below `lend_before` (a LentBatchBuffer that reads the run's
// buffer and holds the stream's own, unused, so that the batch keeps its
// place in the stream's window), copied into the stream's own buffer from
// there on. The last window of a stream is copied because its client may
// hold those batches after the stream ends, when nothing keeps the run from
// reusing its buffers.
//
// Thread-compatible: the stream keeps it under its lock; Take works on a
// slot its caller claimed and reads only constants.
#ifndef STOKER_SERVER_SERVICE_RUN_SOURCE_H_
#define STOKER_SERVER_SERVICE_RUN_SOURCE_H_

#include <cstdint>
#include <memory>

#include "server/service/batch.h"
#include "server/service/stream_slot.h"

namespace stoker::service {

class SharedRun;

class RunSource {
 public:
  RunSource(std::shared_ptr<SharedRun> run, uint64_t lend_before)
      : run_(std::move(run)), lend_before_(lend_before) {}

  const std::shared_ptr<SharedRun>& run() const { return run_; }
  uint64_t lend_before() const { return lend_before_; }

  // Fills `slot` with the run's `batch` (`shared`: other streams get it
  // too): lent when `lend`, else copied.
  static void Take(StreamSlot* slot, std::shared_ptr<const ReadyBatch> batch,
                   bool shared, bool lend);

 private:
  std::shared_ptr<SharedRun> run_;
  uint64_t lend_before_;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_RUN_SOURCE_H_
