#include "client/lib/shm/shm_mapping.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker {

ShmMapping::~ShmMapping() {
  if (base != nullptr) munmap(const_cast<uint8_t*>(base), bytes);
}

absl::StatusOr<int> PresentToken(const std::string& path,
                                 const std::string& token, const char* what) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", what, " path '", path, "' is empty or longer than ",
        sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{};
  tv.tv_sec = 10;
  if (fd < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      send(fd, token.data(), token.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(token.size())) {
    const int err = errno;
    if (fd >= 0) close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot reach the ", what, " ", path, ": ", std::strerror(err)));
  }
  return fd;
}

absl::Status SlotOutOfRange(const v1::Batch& b, const char* ring,
                            uint32_t slots) {
  return absl::DataLossError(absl::StrCat(
      "batch of epoch ", b.epoch(), " step ", b.step(), " names slot ",
      b.slot(), " of ", ring, ", which has ", slots, " slots"));
}

absl::StatusOr<int> FetchDescriptor(const std::string& path,
                                    const std::string& token,
                                    const char* what) {
  absl::StatusOr<int> connected = PresentToken(path, token, what);
  if (!connected.ok()) return connected.status();
  const int sock = *connected;
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  const int err = errno;
  close(sock);
  if (got < 0) {
    return absl::UnavailableError(
        absl::StrCat("stokerd did not answer on the ", what, " ", path,
                     " within 10 s: ", std::strerror(err)));
  }
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (got != 1 || cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) {
    return absl::PermissionDeniedError(absl::StrCat(
        "stokerd did not hand over the stream's memory on the ", what, " ",
        path, ": this process's user is not the daemon's and not in its "
        "socket group"));
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return fd;
}

absl::StatusOr<std::shared_ptr<ShmMapping>> MapShmRing(const v1::ShmRing& ring) {
  absl::StatusOr<int> fetched =
      FetchDescriptor(ring.fd_socket(), ring.token(), "shm socket");
  if (!fetched.ok()) return fetched.status();
  const int fd = *fetched;
  auto mapping = std::make_shared<ShmMapping>();
  mapping->slots = ring.slots();
  mapping->slot_bytes = ring.slot_bytes();
  mapping->bytes = static_cast<size_t>(ring.slots()) * ring.slot_bytes();
  void* base = mmap(nullptr, mapping->bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map the shared-memory ring: ", strerror(errno)));
  }
  mapping->base = static_cast<const uint8_t*>(base);
  return mapping;
}

}  // namespace stoker
