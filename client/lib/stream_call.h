// The private types behind Stream and Batch: one RPC of a stream
// (Stream::Call), a received message a Batch points into (Batch::Message),
// and the acks released batches leave for their stream (ReleaseQueue).
#ifndef STOKER_CLIENT_LIB_STREAM_CALL_H_
#define STOKER_CLIENT_LIB_STREAM_CALL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "client/lib/transport.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.grpc.pb.h"

namespace stoker {

// Acks of released batches whose memory the client held (a transport that
// holds(): shm), for the stream to send. Shared with the batches, which may
// outlive the stream; `generation` changes on every reconnect, so a batch
// of an old ring never acks into a new stream.
struct ReleaseQueue {
  std::mutex mu;
  uint64_t generation = 0;
  std::vector<v1::Ack> acks;
  // Batches of this generation handed out and not yet released.
  uint32_t held = 0;
};

class MessagePool;

struct Batch::Message {
  v1::StreamResponse response;
  // Where the message goes back once its batch is released, or null.
  std::shared_ptr<MessagePool> pool;
  // What the batch's bytes lie in, when not in `response` (BatchBytes::keep).
  std::shared_ptr<const void> keep;
  // Set for a batch the client holds: the ack its release sends.
  std::shared_ptr<ReleaseQueue> release;
  uint64_t generation = 0;
  v1::Ack ack;

  ~Message() { Release(); }
  // The caller is done with the batch: queues its ack (once) and lets go of
  // what held its bytes.
  void Release() {
    if (release != nullptr) {
      std::lock_guard<std::mutex> lock(release->mu);
      if (release->generation == generation) {
        release->acks.push_back(std::move(ack));
        --release->held;
      }
    }
    release = nullptr;
    keep = nullptr;
  }
};

// Received messages kept for reuse once their batch is released. Parsing a
// batch into a used message reuses its payload's memory, where a new
// message's (megabytes a batch over grpc) would be allocated and faulted in
// page by page, as a node taking a helper's batches did for every 9.6 MB
// payload (docs/performance.md). Shared (shared_ptr) by a client,
// its streams and the messages of the batches they hand out, any of which
// may be the last to go. Thread-safe.
class MessagePool : public std::enable_shared_from_this<MessagePool> {
 public:
  // A message that goes back to its pool, however it is let go of.
  using Ptr = std::unique_ptr<Batch::Message, Batch::MessageReturn>;

  // A message to read into, whose `pool` is this one.
  Ptr Get();
  // Takes back `message` (Batch::MessageReturn): released, and kept if
  // its pool has fewer than kMaxIdle waiting; deleted otherwise.
  static void Recycle(Batch::Message* message);

 private:
  // Idle messages are ones that were in flight at once, so keeping them
  // raises no peak; a node's chunks from one helper have up to about this
  // many in flight (two per chunk, a few chunks).
  static constexpr size_t kMaxIdle = 8;
  std::mutex mu_;
  std::vector<std::unique_ptr<Batch::Message>> idle_;  // Guarded by mu_.
};

// Parses a stream message received as gRPC's buffers into `response`. A
// used response keeps its payload's memory (parsing a new message would
// delete the batch of the oneof and allocate it again). False if it does not
// parse.
bool ParseStreamMessage(grpc::ByteBuffer* buffer, v1::StreamResponse* response);

// One RPC of a stream, on its transport (transport.h).
//
// Where the transport has read_ahead() (grpc), a reader thread takes
// messages off the wire as they arrive, so the transfer of a large batch
// overlaps the caller's work between Next() calls instead of starting when
// Next() is called. The queue needs no bound of its own: the daemon never
// has more than the stream's window of batches unacknowledged. Otherwise
// (shm: a message is a few hundred bytes) Next() reads on the caller's
// thread, which saves a thread wakeup and a hand-over per batch; from the
// transport's side channel where it has one, which then also takes the acks.
struct Stream::Call {
  grpc::ClientContext context;
  // Messages arrive as gRPC's buffers, parsed by Read into recycled ones.
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, grpc::ByteBuffer>>
      rw;
  std::shared_ptr<MessagePool> pool;
  bool parse_failed = false;  // Set by Read; the reader's, then End's.
  std::unique_ptr<ClientTransport> transport;
  // The transport's side channel, or null: messages come on the call.
  ClientSideChannel* channel = nullptr;
  bool finished = false;  // Finish() was called; touched by the owner only.

  std::thread reader;  // Only when StartReader() was called.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<MessagePool::Ptr> ready;  // Guarded by mu.
  // Guarded by mu while the reader thread runs; else the owner's.
  bool read_done = false;

  // Opens the RPC on `channel`.
  void Open(grpc::ChannelInterface* channel);
  // The next message of the call into `response` (a used one keeps its
  // payload's memory): false at the end of the call, or for a message that
  // does not parse (then End returns INTERNAL).
  bool Read(v1::StreamResponse* response);
  // Starts the reader thread.
  void StartReader();
  // The next message, or null once the stream has no more: from the reader
  // thread's queue if there is one, else read here, from the side channel
  // if there is one. An error only for a side channel's bad message.
  absl::StatusOr<MessagePool::Ptr> Pop();
  // Sends an ack or an AckList: on the side channel if there is one.
  void Send(const v1::StreamRequest& request);
  // Ends the RPC: cancels it if asked, waits for the reader, and returns the
  // status. Call once.
  grpc::Status End(bool cancel);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_STREAM_CALL_H_
