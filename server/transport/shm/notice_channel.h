// NoticeChannel: the notice socket of one shm or cuda_ipc stream (NoticeSocket
// in local_transports.proto). Batches are announced to the client as frames on
// a unix socket connection, and its acks come back on it, instead of as
// messages on the gRPC call, which cost the trainer thread hand-overs in its
// gRPC library.
//
// The channel registers a one-time token with the FdServer; the client
// presents it on the fd socket, and the FdServer hands the connection over.
// From then on a thread of the channel reads the client's frames and writes
// what Send() could not write at once. Frames: a 4-byte little-endian
// length, then the serialized message.
//
// Thread-safe. Hooks run on the channel's thread, never under its lock, and
// never after Detach() returns (or, for a Detach() from a hook, after that
// hook returns).
#ifndef STOKER_SERVER_TRANSPORT_SHM_NOTICE_CHANNEL_H_
#define STOKER_SERVER_TRANSPORT_SHM_NOTICE_CHANNEL_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/transport/shm/fd_server.h"
#include "server/transport/transport.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

class NoticeChannel : public SideChannel,
                      public std::enable_shared_from_this<NoticeChannel> {
 public:
  // The bound both sides keep (local_transports.proto: NoticeFrame).
  static constexpr size_t kMaxFrameBytes = v1::NOTICE_FRAME_MAX_BYTES;

  // request: a frame from the client; lost: the client closed the
  // connection before End(), or broke the protocol.
  using Hooks = SideChannel::Hooks;

  // `fd_server` outlives the channel.
  static std::shared_ptr<NoticeChannel> Create(FdServer* fd_server,
                                               Hooks hooks);
  ~NoticeChannel() override;

  const std::string& token() const { return token_; }
  const std::string& path() const { return fd_server_->path(); }
  bool connected() const override;

  // Writes `message` as one frame, now or (what the socket does not take
  // at once) from the channel's thread. Nothing is sent before the client
  // connected, nor after End().
  void Send(const v1::StreamResponse& message) override;
  // After what was sent, shuts the connection down: the client reads to
  // the end, then learns the outcome from the call. A client that connects
  // later gets an ended connection.
  void End() override;
  // Forgets the token and stops the thread (joined, unless called on it);
  // no hook runs afterwards.
  void Detach() override;

 private:
  NoticeChannel(FdServer* fd_server, Hooks hooks);
  void Take(int fd);  // On the FdServer's thread.
  void Run();
  // Reads what the client sent and runs the request hook on each whole
  // frame; an error once the connection is over or broke the protocol.
  absl::Status ReadFrames(int fd);
  // Writes pending bytes; false on a broken connection.
  bool FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  FdServer* const fd_server_;
  const Hooks hooks_;
  std::string token_;
  int wake_fd_ = -1;  // An eventfd: Send, End and Detach wake the thread.

  mutable absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  std::string out_ ABSL_GUARDED_BY(mu_);  // Not yet written.
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_ ABSL_GUARDED_BY(mu_) = false;  // The connection is shut down.
  bool detached_ ABSL_GUARDED_BY(mu_) = false;

  std::string in_;  // Read, not yet a whole frame. Channel thread only.
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHM_NOTICE_CHANNEL_H_
