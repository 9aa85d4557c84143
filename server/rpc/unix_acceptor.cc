#include "server/rpc/unix_acceptor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <grpcpp/server_posix.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/log.h"

namespace stoker::rpc {

using metrics::LogLevel;
using metrics::LogLimited;

absl::Status UnixAcceptor::CheckFolder(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : path.substr(0, slash);
  struct stat st;
  if (::stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "listen.unix: the folder ", folder, " of the socket ", path,
      " does not exist: create it first (mkdir -p ", folder,
      "; the systemd unit creates /run/stoker with RuntimeDirectory=stoker), "
      "or put the socket in a folder that exists"));
}

absl::StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::Bind(
    const std::string& path) {
  if (absl::Status s = CheckFolder(path); !s.ok()) return s;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix socket path '", path, "' is too long"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket(AF_UNIX)");
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    close(fd);
    return absl::ErrnoToStatus(
        e, absl::StrCat("cannot bind unix socket '", path, "'"));
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "eventfd");
  }
  return std::unique_ptr<UnixAcceptor>(new UnixAcceptor(fd, wake));
}

UnixAcceptor::UnixAcceptor(int listen_fd, int wake_fd)
    : listen_fd_(listen_fd), wake_fd_(wake_fd) {}

UnixAcceptor::~UnixAcceptor() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

absl::Status UnixAcceptor::Start(grpc::Server* server) {
  if (listen(listen_fd_, SOMAXCONN) != 0) {
    return absl::ErrnoToStatus(errno, "cannot listen on the unix socket");
  }
  thread_ = std::thread([this, server] { AcceptLoop(server); });
  return absl::OkStatus();
}

void UnixAcceptor::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

void UnixAcceptor::AcceptLoop(grpc::Server* server) {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LogLimited(LogLevel::kError, "unix_accept_failed", 6,
                 {{"error", std::strerror(errno)}});
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        // Out of descriptors, most likely: say so, and do not spin.
        LogLimited(LogLevel::kWarning, "unix_accept_failed", 6,
                   {{"error", std::strerror(errno)}});
        poll(nullptr, 0, 100);
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      uid_by_fd_[fd] = cred.uid;
    }
    grpc::AddInsecureChannelFromFd(server, fd);
  }
}

std::string UnixAcceptor::PeerOf(const std::string& grpc_peer) const {
  int fd = -1;
  if (!absl::StartsWith(grpc_peer, "fd:") ||
      !absl::SimpleAtoi(absl::string_view(grpc_peer).substr(3), &fd)) {
    return "";
  }
  absl::MutexLock lock(&mu_);
  auto it = uid_by_fd_.find(fd);
  return it == uid_by_fd_.end() ? "" : absl::StrCat("uid:", it->second);
}

std::string PeerKey(const std::string& grpc_peer,
                    const UnixAcceptor* acceptor) {
  absl::string_view p = grpc_peer;
  if (absl::ConsumePrefix(&p, "ipv4:") || absl::ConsumePrefix(&p, "ipv6:")) {
    const size_t colon = p.rfind(':');
    return absl::StrCat("ip:", p.substr(0, colon));
  }
  if (acceptor != nullptr) {
    std::string uid = acceptor->PeerOf(grpc_peer);
    if (!uid.empty()) return uid;
  }
  return "local";
}

}  // namespace stoker::rpc
