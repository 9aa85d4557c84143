// ChunkReader: one chunk of a node stream's batches, built by one helper.
//
// It opens a stream on the helper for the chunk's positions [begin, end)
// (OpenStream.end) with the node stream's plan, over gRPC, as any client
// of the helper would, and hands each batch to the node stream
// (ChunkSink::TakeRemote) as it arrives, on a thread of its own. However
// it ends (all delivered, the helper failed or was refused, a stall, or
// Cancel), it calls ChunkSink::ChunkEnded once, after its last write, so
// the node stream builds whatever it did not deliver, and then `on_end`.
//
// Thread-safe. Its thread holds a reference to it until it ends, because
// the node stream lets go of the chunk on that thread (in ChunkEnded, or
// TakeRemote's copy): the last reference may drop there, and the
// destructor then detaches rather than joins itself. The owner (HelperPool)
// joins it before it goes away (Join), since `on_end` calls back into it.
#ifndef STOKER_SERVER_REMOTE_CHUNK_READER_H_
#define STOKER_SERVER_REMOTE_CHUNK_READER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "server/service/remote_source.h"
#include "stoker/client.h"

namespace stoker::remote {

// What one helper's chunks delivered, counted batch by batch as the
// readers take them. Thread-safe.
struct HelperCounters {
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> wire_bytes{0};     // Payload bytes as received.
  std::atomic<uint64_t> payload_bytes{0};  // The same, decoded.
  std::atomic<int64_t> wait_ns{0};  // Readers waiting for the helper.
  // Copying, or finishing a uint8 rendering, into the node's buffers.
  std::atomic<int64_t> copy_ns{0};
};

class ChunkReader : public service::RemoteChunk,
                    public std::enable_shared_from_this<ChunkReader> {
 public:
  struct Result {
    absl::Status status;        // Why it ended; OK when all were delivered.
    uint64_t delivered = 0;     // Batches taken by the node stream.
    uint64_t undelivered = 0;   // The chunk's other batches.
    // It ended at a batch of the helper's that skipped samples, which the
    // node does not take: one such chunk keeps the helper up (HelperPool).
    bool skipped = false;
  };
  // `client` (the helper's) and `counters` outlive the reader. `options`
  // is the helper stream: the node stream's plan with start and end set to
  // the chunk (and raw, when the node finishes the helper's rendering).
  // `on_batch` runs on the reader's thread after each batch the node
  // stream took, with whether it was late (service::TakeReport).
  ChunkReader(Client* client, HelperCounters* counters, StreamOptions options,
              uint64_t begin, uint64_t end,
              std::weak_ptr<service::ChunkSink> sink,
              std::function<void(bool late)> on_batch,
              std::function<void(const Result&)> on_end);
  ~ChunkReader() override;

  // Starts the thread. Call once, on a reader owned by a shared_ptr.
  void Start();
  // Waits for the thread to end. Not from the reader's own thread.
  void Join();
  // Ends the chunk soon (a blocked read is interrupted); does not block.
  // It then ends Cancelled.
  void Cancel() override;
  // As Cancel, but the chunk ends with `reason`: the helper failed it.
  void GiveUp(absl::Status reason);
  bool cancelled() const override { return cancelled_; }
  // Whether the thread has ended (then the destructor does not wait).
  bool finished() const { return finished_; }
  // Whether the helper has sent nothing for `ns` nanoseconds up to
  // `now_ns` (steady clock) while the reader waited for it; time spent
  // waiting for the node stream to take a batch does not count.
  bool StalledFor(int64_t now_ns, int64_t ns) const;

 private:
  void Run();
  Result Read();

  // Constant after construction.
  Client* const client_;
  HelperCounters* const counters_;
  const StreamOptions options_;
  const uint64_t begin_;
  const uint64_t end_;
  const std::weak_ptr<service::ChunkSink> sink_;
  const std::function<void(bool)> on_batch_;
  const std::function<void(const Result&)> on_end_;

  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finished_{false};
  // steady_clock ns of the last batch (or the open), and whether the reader
  // is inside TakeRemote, waiting for the node rather than the helper.
  std::atomic<int64_t> last_progress_ns_{0};
  std::atomic<bool> in_sink_{false};
  std::mutex mu_;  // Guards stream_ and reason_.
  Stream* stream_ = nullptr;  // Owned by Read() while it runs.
  absl::Status reason_;       // Set by GiveUp.
  std::thread thread_;
};

}  // namespace stoker::remote

#endif  // STOKER_SERVER_REMOTE_CHUNK_READER_H_
