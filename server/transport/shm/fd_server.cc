#include "server/transport/shm/fd_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace stoker::transport {
namespace {

bool ReadExactly(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, out + got, n - got);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

bool SendFd(int connection, int fd) {
  char byte = 1;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  return sendmsg(connection, &msg, MSG_NOSIGNAL) == 1;
}

std::string NewToken() {
  static thread_local std::random_device random;
  std::string token(FdServer::kTokenBytes, '\0');
  for (size_t i = 0; i < FdServer::kTokenBytes; i += 4) {
    const uint32_t r = random();
    std::memcpy(&token[i], &r, 4);
  }
  return token;
}

}  // namespace

FdServer::FdServer(std::string path, uint32_t mode, int64_t allowed_gid)
    : path_(std::move(path)), mode_(mode), allowed_gid_(allowed_gid) {}

FdServer::~FdServer() { Stop(); }

absl::Status FdServer::Start() {
  sockaddr_un addr{};
  if (path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm socket path is too long: ", path_));
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  unlink(path_.c_str());  // The gRPC socket beside it proved none is live.
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path_.c_str(), mode_) != 0 ||
      (allowed_gid_ >= 0 &&
       chown(path_.c_str(), static_cast<uid_t>(-1),
             static_cast<gid_t>(allowed_gid_)) != 0) ||
      listen(listen_fd_, 64) != 0) {
    const int err = errno;
    close(listen_fd_);
    listen_fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", path_, ": ", std::strerror(err)));
  }
  thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void FdServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

std::string FdServer::Register(const std::shared_ptr<ShmRing>& ring) {
  std::string token = NewToken();
  absl::MutexLock lock(&mu_);
  rings_[token] = ring;
  return token;
}

std::string FdServer::RegisterConnection(std::function<void(int)> take) {
  std::string token = NewToken();
  absl::MutexLock lock(&mu_);
  wanted_[token] = std::move(take);
  return token;
}

void FdServer::Unregister(const std::string& token) {
  absl::MutexLock lock(&mu_);
  rings_.erase(token);
  wanted_.erase(token);
}

void FdServer::AcceptLoop() {
  for (;;) {
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // Stop() shut the socket down.
    }
    if (!Serve(connection)) close(connection);
  }
}

bool FdServer::PeerAllowed(int connection) const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return false;
  }
  return cred.uid == 0 || cred.uid == geteuid() ||
         (allowed_gid_ >= 0 && cred.gid == static_cast<gid_t>(allowed_gid_));
}

bool FdServer::Serve(int connection) {
  // A client that connects and says nothing must not stall the others.
  timeval timeout{1, 0};
  setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::string token(kTokenBytes, '\0');
  if (!ReadExactly(connection, token.data(), kTokenBytes)) return false;
  std::shared_ptr<ShmRing> ring;
  std::function<void(int)> take;
  if (PeerAllowed(connection)) {
    absl::MutexLock lock(&mu_);
    if (auto it = rings_.find(token); it != rings_.end()) {
      ring = it->second.lock();
      rings_.erase(it);
    } else if (auto w = wanted_.find(token); w != wanted_.end()) {
      take = std::move(w->second);
      wanted_.erase(w);
    }
  }
  if (ring != nullptr) {
    if (SendFd(connection, ring->fd())) ring->MarkHandedOver();
    return false;
  }
  const char answer = take ? 1 : 0;  // 0: a plain "no", without a descriptor.
  if (send(connection, &answer, 1, MSG_NOSIGNAL) != 1 || !take) return false;
  timeval none{0, 0};
  setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
  setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
  take(connection);
  return true;
}

}  // namespace stoker::transport
