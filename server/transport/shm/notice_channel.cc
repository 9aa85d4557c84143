#include "server/transport/shm/notice_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker::transport {
namespace {

constexpr size_t kLengthBytes = 4;

uint32_t LoadLength(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 |
         uint32_t{b[3]} << 24;
}

}  // namespace

std::shared_ptr<NoticeChannel> NoticeChannel::Create(FdServer* fd_server,
                                                     Hooks hooks) {
  std::shared_ptr<NoticeChannel> channel(
      new NoticeChannel(fd_server, std::move(hooks)));
  std::weak_ptr<NoticeChannel> weak = channel;
  channel->token_ = fd_server->RegisterConnection([weak](int fd) {
    if (std::shared_ptr<NoticeChannel> c = weak.lock()) {
      c->Take(fd);
    } else {
      close(fd);
    }
  });
  return channel;
}

NoticeChannel::NoticeChannel(FdServer* fd_server, Hooks hooks)
    : fd_server_(fd_server),
      hooks_(std::move(hooks)),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

NoticeChannel::~NoticeChannel() {
  fd_server_->Unregister(token_);
  // The last reference may be the thread's own, dropped as it ends.
  std::thread thread;
  int fd;
  {
    absl::MutexLock lock(&mu_);
    thread = std::move(thread_);
    fd = fd_;
  }
  if (thread.joinable()) {
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
  if (fd >= 0) close(fd);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool NoticeChannel::connected() const {
  absl::MutexLock lock(&mu_);
  return fd_ >= 0;
}

void NoticeChannel::Take(int fd) {
  absl::MutexLock lock(&mu_);
  if (detached_ || fd_ >= 0) {
    close(fd);
    return;
  }
  fd_ = fd;
  if (ended_) {
    // The stream ended before its client connected: nothing to announce.
    shutdown(fd_, SHUT_RDWR);
    shut_ = true;
    return;
  }
  thread_ = std::thread([self = shared_from_this()] { self->Run(); });
}

void NoticeChannel::Send(const v1::StreamResponse& message) {
  const size_t size = message.ByteSizeLong();
  std::string frame(kLengthBytes + size, '\0');
  for (size_t i = 0; i < kLengthBytes; ++i) {
    frame[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  }
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(frame.data() + kLengthBytes));
  absl::MutexLock lock(&mu_);
  if (fd_ < 0 || ended_ || shut_ || detached_) return;
  const bool idle = out_.empty();
  out_ += frame;
  // Behind bytes still queued, or not all taken now: the thread writes the
  // rest when the socket has room (or finds it broken).
  if (!idle || !FlushLocked() || !out_.empty()) Wake();
}

void NoticeChannel::End() {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  ended_ = true;
  if (fd_ < 0 || shut_) return;
  if (out_.empty()) {
    shutdown(fd_, SHUT_RDWR);
    shut_ = true;
  }
  Wake();
}

void NoticeChannel::Detach() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    detached_ = true;
    thread = std::move(thread_);
  }
  fd_server_->Unregister(token_);
  Wake();
  if (thread.joinable()) {
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();  // In a hook: the thread ends after it.
    } else {
      thread.join();
    }
  }
}

void NoticeChannel::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

bool NoticeChannel::FlushLocked() {
  while (!out_.empty()) {
    const ssize_t n =
        send(fd_, out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      out_.clear();  // The client is gone; reading tells the thread.
      return false;
    }
  }
  return true;
}

void NoticeChannel::Run() {
  int fd;
  {
    absl::MutexLock lock(&mu_);
    if (detached_) return;
    fd = fd_;
  }
  if (hooks_.connected) hooks_.connected();
  absl::Status lost;
  for (;;) {
    pollfd polled[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    {
      absl::MutexLock lock(&mu_);
      if (detached_ || shut_) return;
      if (!out_.empty()) polled[0].events |= POLLOUT;
    }
    if (poll(polled, 2, -1) < 0) {
      if (errno == EINTR) continue;
      lost = absl::InternalError(
          absl::StrCat("poll on the notice socket: ", std::strerror(errno)));
      break;
    }
    if (polled[1].revents != 0) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof(count));
    }
    {
      absl::MutexLock lock(&mu_);
      if (detached_) return;
      if (!out_.empty() && (polled[0].revents & POLLOUT) != 0) {
        FlushLocked();
      }
      if (ended_ && out_.empty() && !shut_) {
        shutdown(fd_, SHUT_RDWR);
        shut_ = true;
        return;
      }
    }
    if ((polled[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      lost = ReadFrames(fd);
      if (!lost.ok()) break;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (detached_ || ended_) return;  // An end the stream asked for.
  }
  if (hooks_.lost) hooks_.lost(lost);
}

absl::Status NoticeChannel::ReadFrames(int fd) {
  char buffer[64 << 10];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n == 0) return absl::CancelledError("the client closed its notice socket");
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return absl::OkStatus();
    return absl::CancelledError(
        absl::StrCat("the notice socket broke: ", std::strerror(errno)));
  }
  in_.append(buffer, static_cast<size_t>(n));
  size_t at = 0;
  absl::Status status;
  while (in_.size() - at >= kLengthBytes) {
    const uint32_t length = LoadLength(in_.data() + at);
    if (length > kMaxFrameBytes) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "a frame of ", length, " bytes on the notice socket; at most ",
          kMaxFrameBytes));
      break;
    }
    if (in_.size() - at < kLengthBytes + length) break;
    v1::StreamRequest request;
    if (!request.ParseFromArray(in_.data() + at + kLengthBytes,
                                static_cast<int>(length))) {
      status = absl::InvalidArgumentError(
          "a frame on the notice socket is not a StreamRequest");
      break;
    }
    at += kLengthBytes + length;
    {
      absl::MutexLock lock(&mu_);
      if (detached_) break;
    }
    if (hooks_.request) hooks_.request(request);
  }
  in_.erase(0, at);
  return status;
}

}  // namespace stoker::transport
