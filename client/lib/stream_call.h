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

#include "absl/status/statusor.h"
#include "notice_socket.h"
#include "shm_mapping.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.grpc.pb.h"

namespace stoker {

// Acks of released shm batches, for the stream to send. Shared with the
// batches, which may outlive the stream; `generation` changes on every
// reconnect, so a batch of an old ring never acks into a new stream.
struct ReleaseQueue {
  std::mutex mu;
  uint64_t generation = 0;
  std::vector<v1::Ack> acks;
  // Batches of this generation handed out and not yet released.
  uint32_t held = 0;
};

struct Batch::Message {
  v1::StreamResponse response;
  // Set for shm batches: the ring, and the ack its release sends.
  std::shared_ptr<ShmMapping> shm;
  std::shared_ptr<ReleaseQueue> release;
  uint64_t generation = 0;
  v1::Ack ack;

  ~Message() {
    if (release == nullptr) return;
    std::lock_guard<std::mutex> lock(release->mu);
    if (release->generation == generation) {
      release->acks.push_back(std::move(ack));
      --release->held;
    }
  }
};

// One RPC of a stream.
//
// Over grpc a reader thread takes messages off the wire as they arrive, so
// the transfer of a large batch overlaps the caller's work between Next()
// calls instead of starting when Next() is called. The queue needs no bound
// of its own: the daemon never has more than the stream's window of batches
// unacknowledged.
//
// Over shm a message is a few hundred bytes of slot and layout, so there is
// nothing to overlap: Next() reads it on the caller's thread. That saves a
// thread wakeup and a hand-over per batch, which are most of what a batch
// costs the trainer (the bytes themselves are already in the mapped ring).
// Where the daemon grants a notice socket, messages and acks go over it
// instead of the call: a system call each, where a gRPC message still costs
// hand-overs inside gRPC. The call then only carries the header and, at the
// end, the status.
struct Stream::Call {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>>
      rw;
  std::shared_ptr<ShmMapping> shm;
  // The ring of the shared run the stream joined, if the daemon lends it
  // batches in place (Batch.in_shared_ring).
  std::shared_ptr<ShmMapping> shared_shm;
  // Set when the daemon announces batches on a notice socket.
  std::unique_ptr<NoticeSocket> notices;
  bool finished = false;  // Finish() was called; touched by the owner only.

  std::thread reader;  // Only when StartReader() was called.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Batch::Message>> ready;  // Guarded by mu.
  // Guarded by mu while the reader thread runs; else the owner's.
  bool read_done = false;

  // Starts the reader thread (grpc: large payloads come off the wire while
  // the caller works).
  void StartReader();
  // The next message, or null once the stream has no more: from the reader
  // thread's queue if there is one, else read here, from the notice socket
  // if there is one. An error only for a notice socket's bad frame.
  absl::StatusOr<std::unique_ptr<Batch::Message>> Pop();
  // Sends an ack or an AckList: on the notice socket if there is one.
  void Send(const v1::StreamRequest& request);
  // Ends the RPC: cancels it if asked, waits for the reader, and returns the
  // status. Call once.
  grpc::Status End(bool cancel);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_STREAM_CALL_H_
