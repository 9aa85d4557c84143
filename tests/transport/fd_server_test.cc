#include "server/transport/shm/fd_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::transport {
namespace {

// Asks `path` for the ring of `token`; returns the descriptor or -1.
int Fetch(const std::string& path, const std::string& token) {
  const int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(sock);
    return -1;
  }
  send(sock, token.data(), token.size(), 0);
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
