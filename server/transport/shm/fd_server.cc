#include "server/transport/shm/fd_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "server/metrics/log.h"

namespace stoker::transport {
namespace {

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

// How long accept rests after failing (for want of descriptors, mostly).
constexpr std::chrono::milliseconds kAcceptBackoff{100};

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
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (listen_fd_ < 0 || wake_fd_ < 0) {
    const int err = errno;
    if (listen_fd_ >= 0) close(listen_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    listen_fd_ = wake_fd_ = -1;
    return absl::UnavailableError(absl::StrCat(
        "cannot make the shm socket ", path_, ": ", std::strerror(err)));
  }
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
    close(wake_fd_);
    listen_fd_ = wake_fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", path_, ": ", std::strerror(err)));
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void FdServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    close(wake_fd_);
    unlink(path_.c_str());
  }
}

std::string FdServer::Register(
    const std::shared_ptr<SharedDescriptor>& memory) {
  std::string token = NewToken();
  absl::MutexLock lock(&mu_);
  rings_[token] = memory;
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

void FdServer::AddRunRing(const std::shared_ptr<ShmRing>& ring) {
  absl::MutexLock lock(&mu_);
  for (auto it = run_rings_.begin(); it != run_rings_.end();) {
    it = it->second.expired() ? run_rings_.erase(it) : std::next(it);
  }
  run_rings_[ring.get()] = ring;
}

std::shared_ptr<ShmRing> FdServer::RunRing(
    const service::BufferSource* source) {
  absl::MutexLock lock(&mu_);
  auto it = run_rings_.find(source);
  return it == run_rings_.end() ? nullptr : it->second.lock();
}

FdServer::Stats FdServer::GetStats() const {
  return Stats{refused_.load(), timed_out_.load(), accept_failures_.load()};
}

void FdServer::Loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  Clock::time_point resume_accept = Clock::time_point::min();
  bool starved = false;  // In a spell of failed accepts.
  for (;;) {
    const Clock::time_point now = Clock::now();
    // Drop the connections whose token is late.
    auto late = std::partition(pending.begin(), pending.end(),
                               [&](const Pending& p) { return p.deadline > now; });
    for (auto it = late; it != pending.end(); ++it) {
      timed_out_.fetch_add(1);  // First: the peer may look once it is closed.
      close(it->fd);
    }
    pending.erase(late, pending.end());

    const bool accepting = now >= resume_accept && pending.size() < kMaxPending;
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point wake_at = Clock::time_point::max();
    if (!accepting && now < resume_accept) wake_at = resume_accept;
    for (const Pending& p : pending) {
      fds.push_back({p.fd, POLLIN, 0});
      wake_at = std::min(wake_at, p.deadline);
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      timeout_ms = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count());
      timeout_ms = std::max(timeout_ms, 0);
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      metrics::LogLimited(metrics::LogLevel::kError, "shm_socket_poll_failed",
                          6, {{"error", std::strerror(errno)}});
      std::this_thread::sleep_for(kAcceptBackoff);
      continue;
    }
    if (fds[0].revents != 0) break;  // Stop().

    // The connections that spoke; their entries in fds are 2 onwards, in
    // the order of `pending` before anything below changes it.
    std::vector<Pending> still;
    still.reserve(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) {
      if (fds[i + 2].revents != 0 && ReadToken(&pending[i])) continue;
      still.push_back(std::move(pending[i]));
    }
    pending.swap(still);

    if (fds[1].revents != 0) {
      const int err = AcceptAll(&pending);
      if (err != 0) {
        resume_accept = Clock::now() + kAcceptBackoff;
        if (!starved) {
          metrics::Log(metrics::LogLevel::kError, "shm_accept_failed",
                       {{"socket", path_},
                        {"error", std::strerror(err)},
                        {"action", "backing off; shm opens wait until "
                                   "descriptors are free again"}});
        }
        starved = true;
      } else if (starved) {
        starved = false;
        metrics::Log(metrics::LogLevel::kInfo, "shm_accept_recovered",
                     {{"socket", path_}});
      }
    }
  }
  for (const Pending& p : pending) close(p.fd);
}

int FdServer::AcceptAll(std::vector<Pending>* pending) {
  while (pending->size() < kMaxPending) {
    const int fd = accept4(listen_fd_, nullptr, nullptr,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return 0;
      accept_failures_.fetch_add(1);
      return err;
    }
    Pending p;
    p.fd = fd;
    socklen_t len = sizeof(p.peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &p.peer, &len) != 0) {
      close(fd);
      continue;
    }
    const size_t from_peer = std::count_if(
        pending->begin(), pending->end(),
        [&](const Pending& q) { return q.peer.pid == p.peer.pid; });
    if (from_peer >= kMaxPendingPerPeer) {
      refused_.fetch_add(1);
      metrics::LogLimited(
          metrics::LogLevel::kWarning, "shm_connection_refused", 6,
          {{"socket", path_},
           {"pid", absl::StrCat(p.peer.pid)},
           {"reason", absl::StrCat("the process already has ",
                                   kMaxPendingPerPeer,
                                   " connections that sent no token")}});
      close(fd);
      continue;
    }
    p.deadline = std::chrono::steady_clock::now() + kTokenWait;
    p.token.reserve(kTokenBytes);
    pending->push_back(std::move(p));
  }
  return 0;
}

bool FdServer::ReadToken(Pending* p) {
  char buffer[kTokenBytes];
  const size_t want = kTokenBytes - p->token.size();
  const ssize_t r = read(p->fd, buffer, want);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return false;
  }
  if (r <= 0) {
    close(p->fd);  // Gone, or broken.
    return true;
  }
  p->token.append(buffer, static_cast<size_t>(r));
  if (p->token.size() < kTokenBytes) return false;
  if (!Serve(*p)) close(p->fd);
  return true;
}

bool FdServer::PeerAllowed(const ucred& peer) const {
  return peer.uid == 0 || peer.uid == geteuid() ||
         (allowed_gid_ >= 0 && peer.gid == static_cast<gid_t>(allowed_gid_));
}

bool FdServer::Serve(const Pending& p) {
  std::shared_ptr<SharedDescriptor> ring;
  std::function<void(int)> take;
  if (PeerAllowed(p.peer)) {
    absl::MutexLock lock(&mu_);
    if (auto it = rings_.find(p.token); it != rings_.end()) {
      ring = it->second.lock();
      rings_.erase(it);
    } else if (auto w = wanted_.find(p.token); w != wanted_.end()) {
      take = std::move(w->second);
      wanted_.erase(w);
    }
  }
  // A new socket's send buffer is empty: one byte never blocks.
  if (ring != nullptr) {
    if (SendFd(p.fd, ring->fd())) ring->MarkHandedOver();
    return false;
  }
  const char answer = take ? 1 : 0;  // 0: a plain "no", without a descriptor.
  if (send(p.fd, &answer, 1, MSG_NOSIGNAL) != 1 || !take) return false;
  // The taker gets the socket as a connect() would have made it: blocking.
  fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) & ~O_NONBLOCK);
  take(p.fd);
  return true;
}

}  // namespace stoker::transport
