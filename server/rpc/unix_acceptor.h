// UnixAcceptor: accepts the connections of the daemon's unix socket itself,
// so that every stream knows the uid of the process behind it.
//
// gRPC can listen on a unix socket, but then every call's peer is the same
// "unix:" string. Here the accepted socket's SO_PEERCRED names the process,
// and the connection is handed to the gRPC server as an already connected
// channel (grpc::AddInsecureChannelFromFd), whose calls see the peer "fd:N".
// PeerOf() turns that into "uid:U", the key of limits.max_streams_per_peer.
//
// Thread-safe. One thread accepts; Stop() ends it.
#ifndef STOKER_SERVER_RPC_UNIX_ACCEPTOR_H_
#define STOKER_SERVER_RPC_UNIX_ACCEPTOR_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace stoker::rpc {

class UnixAcceptor {
 public:
  // FailedPrecondition, saying to create it, when the folder `path` is in
  // does not exist or is not a folder (e.g. /run/stoker, which only the
  // systemd unit creates): a config whose socket cannot be bound fails
  // --check-config, not only the start.
  static absl::Status CheckFolder(const std::string& path);
  // Binds `path` (which must not exist) without listening yet, so that its
  // owner and mode can be set before anyone can connect.
  static absl::StatusOr<std::unique_ptr<UnixAcceptor>> Bind(
      const std::string& path);
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Listens and starts accepting; each connection becomes a channel of
  // `server`, which must outlive Stop().
  absl::Status Start(grpc::Server* server);
  // Stops accepting and closes the listening socket. Connections already
  // handed over belong to the gRPC server. Idempotent.
  void Stop();

  // "uid:U" for a gRPC peer string "fd:N" of a connection accepted here,
  // else empty.
  std::string PeerOf(const std::string& grpc_peer) const;

 private:
  UnixAcceptor(int listen_fd, int wake_fd);
  void AcceptLoop(grpc::Server* server);

  const int listen_fd_;
  const int wake_fd_;  // An eventfd that Stop() signals.
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::map<int, uid_t> uid_by_fd_ ABSL_GUARDED_BY(mu_);
};

// The peer key of a gRPC peer string: "ip:ADDR" for TCP ("ipv4:A:P",
// "ipv6:[A]:P"), the acceptor's "uid:U" for the unix socket, else "local".
std::string PeerKey(const std::string& grpc_peer,
                    const UnixAcceptor* acceptor);

}  // namespace stoker::rpc

#endif  // STOKER_SERVER_RPC_UNIX_ACCEPTOR_H_
