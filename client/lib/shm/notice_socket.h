// The client's end of an shm or cuda_ipc stream's notice socket (see
// NoticeSocket in local_transports.proto): after the stream header, the daemon
// announces each batch here instead of on the gRPC call, and the client sends
// its acks here. A read and a write on the trainer's own thread cost a system
// call each, where a gRPC message costs thread hand-overs inside gRPC.
//
// Frames both ways are a 4-byte little-endian length, then that many bytes
// (at most kMaxNoticeFrameBytes) of a serialized message.
//
// Thread-safety: Read() is called by one thread at a time (the stream's
// owner). Write() and Shutdown() may be called from any thread, also while
// a Read() is blocked.
#ifndef STOKER_CLIENT_LIB_SHM_NOTICE_SOCKET_H_
#define STOKER_CLIENT_LIB_SHM_NOTICE_SOCKET_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "stoker/v1/stoker.pb.h"
#include "client/lib/transport.h"

namespace stoker {

// The bound both sides keep (local_transports.proto: NoticeFrame).
inline constexpr size_t kMaxNoticeFrameBytes = v1::NOTICE_FRAME_MAX_BYTES;

class NoticeSocket : public ClientSideChannel {
 public:
  // Connects to `notices.path`, sends the token and reads the daemon's
  // verdict, each step bounded by 10 s; the socket blocks without bound
  // after that. FailedPrecondition when the socket cannot be reached,
  // PermissionDenied when the daemon refuses the token or this peer,
  // Unavailable when it does not answer in time.
  static absl::StatusOr<std::unique_ptr<NoticeSocket>> Connect(
      const v1::NoticeSocket& notices);

  // Takes `fd`, a connected stream socket past the handshake (a test's
  // socketpair end); `path` names it in errors.
  NoticeSocket(int fd, std::string path);
  ~NoticeSocket() override;  // Closes the socket.
  NoticeSocket(const NoticeSocket&) = delete;
  NoticeSocket& operator=(const NoticeSocket&) = delete;

  // Reads the next frame into `response`: true with a message; false when
  // the daemon shut the connection down (or reset it, or Shutdown() was
  // called), which is the end of the stream's batches. DataLoss, naming the
  // socket, for a frame over the bound or one that does not parse. One
  // read() may bring several frames: the rest wait in a buffer for the next
  // calls. REQUIRES: no other Read() at the same time.
  absl::StatusOr<bool> Read(v1::StreamResponse* response) override;

  // After Read() returned false: whether the connection ended inside a
  // frame (a daemon that went away mid-write).
  bool truncated() const override { return truncated_; }

  // Sends `request` as one whole frame; frames of concurrent calls never
  // interleave. A connection the daemon closed is not an error here: the
  // stream's end shows on the read side.
  void Write(const v1::StreamRequest& request) override;

  // Shuts both directions down, so a Read() blocked in read() returns
  // false. Idempotent; the descriptor stays open until destruction.
  void Shutdown() override;

  const std::string& path() const override { return path_; }

 private:
  const int fd_;
  const std::string path_;

  // Owned by the reading thread: bytes read and not yet taken are
  // buffer_[begin_, end_), in a buffer of `capacity_` bytes (not zeroed:
  // a read fills what it uses).
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool truncated_ = false;

  // Held across one whole frame's send() calls. Acks are a few dozen bytes
  // and the daemon reads them as they come, so a send does not block long.
  std::mutex write_mu_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_SHM_NOTICE_SOCKET_H_
