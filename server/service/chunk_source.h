// ChunkSource: the part of a stream that has helpers build chunks of its
// batches (remote_source.h). At each chunk boundary it offers the placer
// the next chunk, saying how much the stream needs help: the consumer's
// stall share over the last second of acks, and whether no finished batch
// waits in its window. The slots of a chunk it placed are the chunk's to
// fill: the stream's TakeRemote claims one and Copy checks the helper's
// batch against it and copies it in (or finishes the helper's uint8
// rendering). When a chunk ends early, the stream builds the slots it did
// not fill on its own tasks; positions of the ended chunk not yet started
// are built there too, and counted as rebuilt.
//
// Thread rules: its mutable state (the open chunks, the newest chunk's
// bounds, the recent acks) is guarded by the owning stream's lock, which
// every *Locked method REQUIRES; the stream takes that lock once per batch
// anyway, so this adds none. Copy reads only what is constant after
// construction and the slot its caller claimed, outside the lock.
#ifndef STOKER_SERVER_SERVICE_CHUNK_SOURCE_H_
#define STOKER_SERVER_SERVICE_CHUNK_SOURCE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/service/batch.h"
#include "server/service/counters.h"
#include "server/service/remote_source.h"
#include "server/service/stream_slot.h"
#include "server/service/stream_spec.h"
#include "server/service/task_source.h"

namespace stoker::service {

class ChunkSource {
 public:
  // `placer`, `spec`, `tasks` and `layout` outlive the source (the placer
  // outlives every stream; the rest are the stream's). [start, end): the
  // stream's linear positions.
  ChunkSource(ChunkPlacer* placer, const StreamSpec* spec,
              const dataset::Dataset& dataset, const TaskSource* tasks,
              const BatchLayout* layout, uint64_t steps_per_epoch,
              uint64_t start, uint64_t end, OnCorrupt on_corrupt);

  // Whether the slot at `pos` is a helper's to fill: it falls in the open
  // chunk, or starts one that the placer places (`slots`: the stream's
  // window, `sink`: the stream). Sets *chunk to the chunk's id. A position
  // of a chunk that ended early is counted into `counts` as rebuilt.
  // REQUIRES: the stream's lock.
  bool PlaceLocked(uint64_t pos,
                   const std::map<uint64_t, std::unique_ptr<StreamSlot>>& slots,
                   std::weak_ptr<ChunkSink> sink, Counts* counts,
                   uint64_t* chunk);
  // The consumer acked a batch at `now_ns`. REQUIRES: the stream's lock.
  void RecordAckLocked(int64_t now_ns, double wait_seconds,
                       double busy_seconds);
  // The open chunk `chunk`, or null. REQUIRES: the stream's lock.
  std::shared_ptr<RemoteChunk> FindLocked(uint64_t chunk) const;
  // `chunk` fills no more slots. REQUIRES: the stream's lock.
  void EndLocked(uint64_t chunk) { chunks_.erase(chunk); }
  // Every open chunk. REQUIRES: the stream's lock.
  std::vector<std::shared_ptr<RemoteChunk>> OpenLocked() const;

  // Checks `remote` against `slot` (claimed by the caller) and copies it
  // into the slot's buffer, or formats its rendering there; runs the batch
  // op on a rendering. FailedPrecondition when it is not the batch this
  // daemon would build (remote_batch.h).
  absl::StatusOr<ReadyBatch> Copy(const RemoteBatch& remote,
                                  StreamSlot* slot) const;

 private:
  // The acks of the last second: (steady ns, wait, busy).
  struct AckFigures {
    int64_t at_ns;
    double wait_seconds, busy_seconds;
  };

  // Constant after construction.
  ChunkPlacer* const placer_;
  const StreamSpec* const spec_;
  const TaskSource* const tasks_;
  const BatchLayout* const layout_;
  const uint64_t steps_per_epoch_;
  const uint64_t start_, end_;
  const bool fail_on_corrupt_;
  // Empty when the records cannot prove it, which no helper matches.
  const std::string content_digest_;
  // What a helper's uint8 rendering of this stream's batches looks like;
  // set when the pipeline can finish one.
  const std::optional<BatchLayout> rendered_layout_;

  // Guarded by the stream's lock. Open chunks by their first position;
  // [chunk_begin_, chunk_end_) is the newest chunk placed (ended or not).
  std::map<uint64_t, std::shared_ptr<RemoteChunk>> chunks_;
  uint64_t chunk_begin_ = 0;
  uint64_t chunk_end_ = 0;
  std::deque<AckFigures> recent_acks_;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_CHUNK_SOURCE_H_
