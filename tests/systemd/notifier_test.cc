#include "server/systemd/notifier.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker::systemd {
namespace {

// The service manager's end: a datagram socket in a temp dir, named by
// NOTIFY_SOCKET while the test runs.
class NotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = ::testing::TempDir() + "/notify_XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir + "/notify.sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
  }
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  // The next message, or nullopt after `timeout`.
  std::optional<std::string> Receive(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(n));
  }

  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

TEST_F(NotifierTest, SendsStateChangesWithStatus) {
  Notifier notifier;
  ASSERT_TRUE(notifier.enabled());
  EXPECT_EQ(notifier.watchdog_timeout().count(), 0);
  notifier.Ready("serving 2 datasets");
  EXPECT_EQ(Receive(std::chrono::seconds(5)),
            "READY=1\nSTATUS=serving 2 datasets");
  notifier.Reloading();
  const std::optional<std::string> reloading = Receive(std::chrono::seconds(5));
  ASSERT_TRUE(reloading.has_value());
  EXPECT_TRUE(absl::StartsWith(*reloading, "RELOADING=1\nMONOTONIC_USEC="))
      << *reloading;
  notifier.Status("two\nlines");
  EXPECT_EQ(Receive(std::chrono::seconds(5)), "STATUS=two lines");
  notifier.Stopping("bye");
  EXPECT_EQ(Receive(std::chrono::seconds(5)), "STOPPING=1\nSTATUS=bye");
}

TEST_F(NotifierTest, PingsTheWatchdogAtHalfTheTimeoutWithStatus) {
  setenv("WATCHDOG_USEC", "200000", 1);
  Notifier notifier;
  EXPECT_EQ(notifier.watchdog_timeout(), std::chrono::milliseconds(200));
  int calls = 0;
  notifier.SetStatusSource([&calls] { return absl::StrCat("call ", ++calls); });
  const auto start = std::chrono::steady_clock::now();
  notifier.Start();
  // The first message carries the first status; later ones only pings
  // until the status interval (2 s) comes round.
  EXPECT_EQ(Receive(std::chrono::seconds(5)), "WATCHDOG=1\nSTATUS=call 1");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Receive(std::chrono::seconds(5)), "WATCHDOG=1");
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // Four pings, 100 ms apart: about 300 ms.
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500));
  notifier.Stop();
  notifier.Stop();  // Idempotent.
  EXPECT_EQ(calls, 1);
}

TEST_F(NotifierTest, IgnoresAWatchdogMeantForAnotherProcess) {
  setenv("WATCHDOG_USEC", "200000", 1);
  setenv("WATCHDOG_PID", "1", 1);
  Notifier notifier;
  EXPECT_EQ(notifier.watchdog_timeout().count(), 0);
}

TEST(NotifierOffTest, DoesNothingWithoutNotifySocket) {
  unsetenv("NOTIFY_SOCKET");
  Notifier notifier;
  EXPECT_FALSE(notifier.enabled());
  notifier.Start();
  notifier.Ready("x");  // No socket to send to, and no error.
  notifier.Stop();
}

}  // namespace
}  // namespace stoker::systemd
