// The seam between a Stream and the helpers that may build some of its
// batches (docs/remote-design.md): service/ knows chunks of positions and
// batches as plain values; server/remote/ knows helpers, gRPC and the C++
// client library.
//
// A chunk is a run of consecutive positions [begin, end) of one stream that
// one helper builds. Stream::Fill asks the placer at each chunk boundary;
// when it places one, the chunk's positions become batches whose source is
// the chunk, and the chunk hands each one over with ChunkSink::TakeRemote
// as it arrives, in order. When the chunk ends early (the helper failed,
// stalled or was refused), ChunkSink::ChunkEnded makes the stream build
// what the chunk did not deliver on its own workers. The chunk never writes
// after ChunkEnded, so no batch is written twice.
//
// Thread-safety: implementations are thread-safe.
#ifndef STOKER_SERVER_SERVICE_REMOTE_SOURCE_H_
#define STOKER_SERVER_SERVICE_REMOTE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/tensor/dtype.h"

namespace stoker::service {

struct StreamSpec;

// One tensor of a batch a helper sent, borrowed from its message.
struct RemoteTensor {
  std::string_view name;
  tensor::DType dtype = tensor::DType::kUint8;
  std::vector<int64_t> shape;  // Batch dimension first.
  const uint8_t* data = nullptr;
  size_t size = 0;  // Bytes.
};

// A batch a helper built, valid for the duration of the TakeRemote call.
struct RemoteBatch {
  // The helper sent the uint8 rendering (OpenStream.raw): the stream
  // finishes it (BoundPipeline::FormatRendered, the batch op).
  bool rendered = false;
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> sample_ids;
  std::vector<uint64_t> skipped_ids;
  std::vector<uint32_t> sample_reps;   // Empty, or parallel to sample_ids.
  std::vector<uint32_t> skipped_reps;  // Empty, or parallel to skipped_ids.
  std::vector<RemoteTensor> tensors;
};

// What a stream says of a helper's batch it took.
struct TakeReport {
  // Copying, or finishing the rendering, into the stream's buffer.
  int64_t copy_ns = 0;
  // The stream's consumer was held up by it: it was the next batch to
  // hand over while a later one was already finished. The placer gives
  // that helper fewer chunks (docs/remote-design.md §1.1).
  bool late = false;
};

// The stream a chunk delivers into.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Hands over the chunk's batch at linear position `pos`: waits until the
  // stream has started that batch (it has a buffer for it), checks that the
  // batch is the one the stream would build (position, tensors), copies it
  // in and marks it done. Cancelled when the stream no longer wants it
  // (cancelled, failed); FailedPrecondition when the batch is not what the
  // stream would build. On an error the chunk stops and calls ChunkEnded.
  // Fills *report (not null) as it goes.
  virtual absl::Status TakeRemote(uint64_t chunk, uint64_t pos,
                                  const RemoteBatch& batch,
                                  TakeReport* report) = 0;
  // The chunk delivers nothing more, whether it delivered all of its
  // positions or failed: every position of it not yet taken is built by the
  // stream itself. The chunk writes nothing after this call.
  virtual void ChunkEnded(uint64_t chunk) = 0;
};

// A placed chunk, as its stream holds it.
class RemoteChunk {
 public:
  virtual ~RemoteChunk() = default;
  // Stops the chunk soon; it then calls ChunkEnded. Does not block.
  virtual void Cancel() = 0;
  // True once Cancel was called (by anyone): a TakeRemote that waits for
  // the stream gives up.
  virtual bool cancelled() const = 0;
};

// One helper of this daemon, as metrics and `stoker top` see it: its state
// now and what it did since the daemon started.
struct HelperStats {
  std::string address;
  bool up = false;
  uint32_t open_chunks = 0;
  uint64_t chunks = 0;         // Chunks placed on it.
  uint64_t batches = 0;        // Batches it delivered.
  uint64_t samples = 0;
  uint64_t failures = 0;       // Chunks that ended early with an error.
  uint64_t rebuilt = 0;        // Batches of those chunks built here instead.
  uint64_t late = 0;           // Batches that held a consumer up (TakeReport).
  double allowance = 0;        // Chunks it may have open now.
  uint64_t wire_bytes = 0;     // Batch bytes received, as sent.
  uint64_t payload_bytes = 0;  // The same, decoded.
  double wait_seconds = 0;     // Its chunks' readers waited for it.
  // This daemon copying its batches in, or finishing its renderings.
  double copy_seconds = 0;
  std::string last_error;  // The latest failure or refusal, or empty.
};

// A chunk a stream offers its placer at a chunk boundary.
struct ChunkRequest {
  const StreamSpec* spec = nullptr;  // Borrowed for the Place call.
  // The dataset's content digest (dataset/content_digest.h), which the
  // helper's must equal: the same samples, not only the same manifest.
  std::string_view content_digest;
  uint64_t steps_per_epoch = 0;
  uint64_t begin = 0, end = 0;  // Linear positions [begin, end).
  // Whether the stream can finish a helper's uint8 rendering
  // (BoundPipeline::can_finish_rendered), so the helper may send that.
  bool can_finish_rendered = false;
  // How much the stream needs help now: its consumer's stall share over
  // the last second of acks (0 without acks), and whether no finished
  // batch waits in its window.
  double stall_share = 0;
  bool starved = false;
};

// Decides which chunks go to a helper, and opens them.
class ChunkPlacer {
 public:
  virtual ~ChunkPlacer() = default;
  // Positions per chunk (>= 1) for a stream of `window` batches.
  virtual uint32_t chunk_steps(uint32_t window) const = 0;
  // Opens the chunk on a helper, or returns null: the stream builds its
  // batches itself. `sink` is told about the chunk's batches under the id
  // `request.begin`.
  virtual std::shared_ptr<RemoteChunk> Place(const ChunkRequest& request,
                                             std::weak_ptr<ChunkSink> sink) = 0;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_REMOTE_SOURCE_H_
