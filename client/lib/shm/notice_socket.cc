#include "client/lib/shm/notice_socket.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/lib/shm/shm_mapping.h"

namespace stoker {
namespace {

constexpr size_t kLengthBytes = 4;
// Room for a read() to bring many notices (a few hundred bytes each) at once.
constexpr size_t kReadChunk = 64 << 10;

}  // namespace

absl::StatusOr<std::unique_ptr<NoticeSocket>> NoticeSocket::Connect(
    const v1::NoticeSocket& notices) {
  const std::string& path = notices.path();
  absl::StatusOr<int> fd = PresentToken(path, notices.token(), "notice socket");
  if (!fd.ok()) return fd.status();
  // The descriptor is the NoticeSocket's from here on, also on errors.
  auto socket = std::make_unique<NoticeSocket>(*fd, path);
  char verdict = 0;
  ssize_t got;
  do {
    got = recv(*fd, &verdict, 1, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return absl::UnavailableError(absl::StrCat(
        "stokerd did not answer on the notice socket ", path,
        " within 10 s: ", std::strerror(errno)));
  }
  if (got == 0) {
    return absl::UnavailableError(absl::StrCat(
        "stokerd closed the notice socket ", path, " before answering"));
  }
  if (verdict != 1) {
    return absl::PermissionDeniedError(absl::StrCat(
        "stokerd refused the notice socket ", path,
        ": the token is unknown or spent, or this process's user is not the "
        "daemon's and not in its socket group"));
  }
  // The stream's reads are not bounded: a trainer may wait for its data as
  // long as it takes.
  timeval none{};
  setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
  setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
  return socket;
}

NoticeSocket::NoticeSocket(int fd, std::string path)
    : fd_(fd), path_(std::move(path)) {}

NoticeSocket::~NoticeSocket() { close(fd_); }

absl::StatusOr<bool> NoticeSocket::Read(v1::StreamResponse* response) {
  for (;;) {
    const size_t available = end_ - begin_;
    size_t needed = kLengthBytes;
    if (available >= kLengthBytes) {
      const auto* p = reinterpret_cast<const uint8_t*>(buffer_.get() + begin_);
      const uint32_t length = uint32_t{p[0]} | uint32_t{p[1]} << 8 |
                              uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
      if (length > kMaxNoticeFrameBytes) {
        return absl::DataLossError(absl::StrCat(
            "a frame of ", length, " bytes on the notice socket ", path_,
            " is over the bound of ", kMaxNoticeFrameBytes, " bytes"));
      }
      needed = kLengthBytes + length;
      if (available >= needed) {
        const bool parsed = response->ParseFromArray(
            buffer_.get() + begin_ + kLengthBytes, static_cast<int>(length));
        begin_ += needed;
        if (begin_ == end_) begin_ = end_ = 0;
        if (!parsed) {
          return absl::DataLossError(absl::StrCat(
              "a frame of ", length, " bytes on the notice socket ", path_,
              " is not a StreamResponse"));
        }
        return true;
      }
    }
    // Not a whole frame yet: make room for the rest of it and read.
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, available);
      begin_ = 0;
      end_ = available;
    }
    if (capacity_ < std::max(needed, kReadChunk)) {
      const size_t capacity = std::max(needed, kReadChunk);
      std::unique_ptr<char[]> bigger(new char[capacity]);
      if (end_ > 0) std::memcpy(bigger.get(), buffer_.get(), end_);
      buffer_ = std::move(bigger);
      capacity_ = capacity;
    }
    ssize_t got;
    do {
      got = read(fd_, buffer_.get() + end_, capacity_ - end_);
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
      // EOF, a reset, or a socket shut down under us: the end either way;
      // the call's status says why.
      truncated_ = end_ > begin_;
      return false;
    }
    end_ += static_cast<size_t>(got);
  }
}

void NoticeSocket::Write(const v1::StreamRequest& request) {
  std::string frame(kLengthBytes, '\0');
  request.AppendToString(&frame);
  const size_t length = frame.size() - kLengthBytes;
  for (size_t i = 0; i < kLengthBytes; ++i) {
    frame[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n =
        send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    // EPIPE, ECONNRESET: the daemon has ended the stream, which the next
    // Read() sees.
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

void NoticeSocket::Shutdown() { shutdown(fd_, SHUT_RDWR); }

}  // namespace stoker
