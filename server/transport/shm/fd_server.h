// FdServer: hands the descriptors of shared memory (shm rings, cuda_ipc
// device rings: SharedDescriptor) to the clients that own them, over a unix
// socket beside the daemon's gRPC socket. The shm and cuda_ipc transports
// each run one.
//
// Protocol: a client connects, sends the 16-byte token it got in its stream
// header, and receives one byte: with the ring's descriptor attached
// (SCM_RIGHTS), or without one when refused. A token works once.
// Only a peer whose uid is the daemon's (or root), or whose gid is the
// configured group, gets a descriptor: a memfd can be opened by nobody else.
//
// A token may also name a connection wanted by its stream (the notice socket,
// see NoticeSocket in local_transports.proto): such a peer gets the byte 1, and
// the connection is handed over to whoever registered the token.
//
// No connection can hold up another: one thread polls every connection that
// has yet to present its token, each must do so within kTokenWait of being
// accepted (all 16 bytes, not one byte at a time), and a process may have at
// most kMaxPendingPerPeer such connections: one past that is closed at once.
// With kMaxPending in all, new ones wait in the listen backlog until one
// goes. When accept fails for want of descriptors (EMFILE and kin), the loop
// logs once per spell, backs off and goes on.
//
// Thread-safe. Owns one thread, started by Start() and joined by Stop();
// the destructor calls Stop().
#ifndef STOKER_SERVER_TRANSPORT_SHM_FD_SERVER_H_
#define STOKER_SERVER_TRANSPORT_SHM_FD_SERVER_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/transport/shared_descriptor.h"
#include "server/transport/shm/shm_ring.h"

namespace stoker::transport {

class FdServer {
 public:
  static constexpr size_t kTokenBytes = 16;
  // Bounds on the connections that have not yet presented their token.
  static constexpr std::chrono::milliseconds kTokenWait{2000};
  static constexpr size_t kMaxPendingPerPeer = 8;
  static constexpr size_t kMaxPending = 128;

  // `allowed_gid` < 0: only the daemon's uid (and root).
  FdServer(std::string path, uint32_t mode, int64_t allowed_gid);
  ~FdServer();

  absl::Status Start();
  void Stop();

  const std::string& path() const { return path_; }

  // Registers `memory` and returns its one-time token. The server holds it
  // weakly: memory whose stream ended is never handed out.
  std::string Register(const std::shared_ptr<SharedDescriptor>& memory);
  // Registers a wanted connection and returns its one-time token. The
  // connection that presents it is passed to `take` (on this server's
  // thread), which owns the descriptor from then on.
  std::string RegisterConnection(std::function<void(int)> take);
  // Forgets a token of either kind.
  void Unregister(const std::string& token);

  // The rings shared runs build in (the composition root makes them), so
  // that a stream's open, which reports its run's memory as a plain
  // BufferSource, can offer that ring to its client. Held weakly.
  void AddRunRing(const std::shared_ptr<ShmRing>& ring);
  // The run ring behind `source`, or null if it is none of them.
  std::shared_ptr<ShmRing> RunRing(const service::BufferSource* source);

  // Connections refused for a bound or dropped for a late token, and
  // accept failures, since Start (tests and metrics).
  struct Stats {
    uint64_t refused = 0;
    uint64_t timed_out = 0;
    uint64_t accept_failures = 0;
  };
  Stats GetStats() const;

 private:
  // A connection that has not presented its whole token yet.
  struct Pending {
    int fd = -1;
    ucred peer{};
    std::chrono::steady_clock::time_point deadline;
    std::string token;  // The bytes read so far.
  };

  void Loop();
  // Accepts what the listening socket has; returns 0, or the errno of an
  // accept that failed (EMFILE, mostly; the loop then backs off).
  int AcceptAll(std::vector<Pending>* pending);
  // Reads what `p` has sent; true when it is done with (served, refused,
  // gone or handed over), and then its descriptor is no longer ours.
  bool ReadToken(Pending* p);
  // Answers a whole token; true if the connection was handed over.
  bool Serve(const Pending& p);
  bool PeerAllowed(const ucred& peer) const;

  const std::string path_;
  const uint32_t mode_;
  const int64_t allowed_gid_;  // < 0: none.
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // Written by Stop() to end the loop.
  std::thread thread_;
  // Touched only by the loop's thread; read by GetStats.
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> timed_out_{0};
  std::atomic<uint64_t> accept_failures_{0};

  absl::Mutex mu_;
  std::map<std::string, std::weak_ptr<SharedDescriptor>> rings_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<void(int)>> wanted_
      ABSL_GUARDED_BY(mu_);
  std::map<const service::BufferSource*, std::weak_ptr<ShmRing>> run_rings_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHM_FD_SERVER_H_
