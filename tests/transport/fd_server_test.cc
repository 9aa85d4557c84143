#include "server/transport/shm/fd_server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::transport {
namespace {

using ::stoker::testing::WaitFor;

// A client socket connected to `path` whose reads give up after `timeout`
// (so that a test never hangs on a server that does not answer), or -1.
int Connect(const std::string& path,
            std::chrono::seconds timeout = std::chrono::seconds(5)) {
  const int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  timeval tv{static_cast<time_t>(timeout.count()), 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(sock);
    return -1;
  }
  return sock;
}

// Sends `token` on the connected `sock` and closes it; returns the ring's
// descriptor the answer carries, or -1.
int Present(int sock, const std::string& token) {
  send(sock, token.data(), token.size(), MSG_NOSIGNAL);
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t got = recvmsg(sock, &msg, 0);
  close(sock);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (got != 1 || cmsg == nullptr) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return fd;
}

// Asks `path` for the ring of `token`; returns the descriptor or -1.
int Fetch(const std::string& path, const std::string& token) {
  const int sock = Connect(path);
  return sock < 0 ? -1 : Present(sock, token);
}

// Whether the server closed `sock` (a read sees the end) before the read
// timed out.
bool ClosedByServer(int sock) {
  char byte;
  return read(sock, &byte, 1) == 0;
}

class FdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FdServer>(dir_.path() + "/s.shm", 0660, -1);
    ASSERT_TRUE(server_->Start().ok());
    auto ring = ShmRing::Create("test-ring", 2, 1000, nullptr);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *ring;
  }
  testing::ScopedTempDir dir_;
  std::unique_ptr<FdServer> server_;
  std::shared_ptr<ShmRing> ring_;
};

TEST_F(FdServerTest, HandsTheRingToTheHolderOfItsTokenOnce) {
  const std::string token = server_->Register(ring_);
  const int fd = Fetch(server_->path(), token);
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 2 * ring_->slot_bytes());
  close(fd);
  EXPECT_EQ(Fetch(server_->path(), token), -1) << "a token works once";
}

TEST_F(FdServerTest, AWrongTokenGetsNothing) {
  server_->Register(ring_);
  EXPECT_EQ(Fetch(server_->path(), std::string(FdServer::kTokenBytes, 'x')),
            -1);
}

TEST_F(FdServerTest, ARingWhoseStreamEndedIsNeverHandedOut) {
  const std::string token = server_->Register(ring_);
  ring_.reset();
  EXPECT_EQ(Fetch(server_->path(), token), -1);
}

TEST_F(FdServerTest, StopRemovesTheSocket) {
  server_->Stop();
  EXPECT_NE(access((dir_.path() + "/s.shm").c_str(), F_OK), 0);
}

// One connection served at a time, each allowed 1 s of silence, made 20
// idle connections stall every shm open for 20 s.
TEST_F(FdServerTest, IdleConnectionsDoNotHoldUpAFetch) {
  std::vector<int> idle;
  for (size_t i = 0; i + 1 < FdServer::kMaxPendingPerPeer; ++i) {
    idle.push_back(Connect(server_->path()));
    ASSERT_GE(idle.back(), 0);
  }
  const std::string token = server_->Register(ring_);
  const auto began = std::chrono::steady_clock::now();
  const int fd = Fetch(server_->path(), token);
  EXPECT_GE(fd, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - began, FdServer::kTokenWait)
      << "the fetch waited for the idle connections";
  if (fd >= 0) close(fd);
  for (int s : idle) close(s);
}

TEST_F(FdServerTest, ATokenSentByteByByteTooSlowlyIsDropped) {
  const int sock = Connect(server_->path());
  ASSERT_GE(sock, 0);
  send(sock, "x", 1, MSG_NOSIGNAL);  // Then nothing: a read waits.
  EXPECT_TRUE(ClosedByServer(sock));
  EXPECT_EQ(server_->GetStats().timed_out, 1u);
  close(sock);
}

TEST_F(FdServerTest, ConnectionsPastThePerProcessBoundAreClosedAtOnce) {
  std::vector<int> idle;
  for (size_t i = 0; i < FdServer::kMaxPendingPerPeer; ++i) {
    idle.push_back(Connect(server_->path()));
    ASSERT_GE(idle.back(), 0);
  }
  const int extra = Connect(server_->path());
  ASSERT_GE(extra, 0);
  const auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(ClosedByServer(extra));
  EXPECT_LT(std::chrono::steady_clock::now() - began, FdServer::kTokenWait);
  EXPECT_EQ(server_->GetStats().refused, 1u);
  close(extra);
  for (int s : idle) close(s);
}

// The accept loop used to end on EMFILE, and every later shm open failed.
TEST_F(FdServerTest, KeepsServingAfterASpellWithoutDescriptors) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int sock = socket(AF_UNIX, SOCK_STREAM, 0);  // Made while we can.
  ASSERT_GE(sock, 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 4096);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (;;) {
    const int fd = dup(0);
    if (fd < 0) break;
    filler.push_back(fd);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, server_->path().c_str(),
               sizeof(addr.sun_path) - 1);
  ASSERT_EQ(connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  const bool failed = WaitFor(
      [&] { return server_->GetStats().accept_failures > 0; },
      std::chrono::seconds(10));
  for (int fd : filler) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(failed) << "accept never ran out of descriptors";
  timeval tv{5, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const int fd = Present(sock, server_->Register(ring_));
  EXPECT_GE(fd, 0) << "the server stopped accepting";
  if (fd >= 0) close(fd);
  const int later = Fetch(server_->path(), server_->Register(ring_));
  EXPECT_GE(later, 0);
  if (later >= 0) close(later);
}

TEST(ShmRingTest, SlotsAreReusedOnlyAfterRelease) {
  auto ring = ShmRing::Create("test-ring", 2, 100, nullptr);
  ASSERT_TRUE(ring.ok());
  auto a = (*ring)->Take();
  auto b = (*ring)->Take();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint32_t slot_a = static_cast<ShmSlotBuffer*>(a.get())->slot();
  a.reset();  // Dropping the buffer does not free the slot...
  EXPECT_EQ((*ring)->Take(), nullptr);
  (*ring)->Release(slot_a);  // ...the client's release does,
  (*ring)->Release(slot_a);  // once.
  EXPECT_EQ((*ring)->free_slots(), 1u);
  EXPECT_NE((*ring)->Take(), nullptr);
}

}  // namespace
}  // namespace stoker::transport
