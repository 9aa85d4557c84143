// FdServer: hands the descriptors of shared-memory rings to the clients that
// own them, over a unix socket beside the daemon's gRPC socket.
//
// Protocol: a client connects, sends the 16-byte token it got in its stream
// header, and receives one byte: with the ring's descriptor attached
// (SCM_RIGHTS), or without one when refused. A token works once.
// Only a peer whose uid is the daemon's (or root), or whose gid is the
// configured group, gets a descriptor: a memfd can be opened by nobody else.
//
// A token may also name a connection wanted by its stream (the notice
// socket, see NoticeSocket in stoker.proto): such a peer gets the byte 1,
// and the connection is handed over to whoever registered the token.
//
// Thread-safe. Owns one thread, started by Start() and joined by Stop();
// the destructor calls Stop().
#ifndef STOKER_SERVER_TRANSPORT_SHM_FD_SERVER_H_
#define STOKER_SERVER_TRANSPORT_SHM_FD_SERVER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/transport/shm/shm_ring.h"

namespace stoker::transport {

class FdServer {
 public:
  static constexpr size_t kTokenBytes = 16;

  // `allowed_gid` < 0: only the daemon's uid (and root).
  FdServer(std::string path, uint32_t mode, int64_t allowed_gid);
  ~FdServer();

  absl::Status Start();
  void Stop();

  const std::string& path() const { return path_; }

  // Registers `ring` and returns its one-time token. The server holds the
  // ring weakly: a ring whose stream ended is never handed out.
  std::string Register(const std::shared_ptr<ShmRing>& ring);
  // Registers a wanted connection and returns its one-time token. The
  // connection that presents it is passed to `take` (on this server's
  // thread), which owns the descriptor from then on.
  std::string RegisterConnection(std::function<void(int)> take);
  // Forgets a token of either kind.
  void Unregister(const std::string& token);

 private:
  void AcceptLoop();
  // Whether the connection was handed over (else the caller closes it).
  bool Serve(int connection);
  bool PeerAllowed(int connection) const;

  const std::string path_;
  const uint32_t mode_;
  const int64_t allowed_gid_;  // < 0: none.
  int listen_fd_ = -1;
  std::thread thread_;

  absl::Mutex mu_;
  std::map<std::string, std::weak_ptr<ShmRing>> rings_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<void(int)>> wanted_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHM_FD_SERVER_H_
