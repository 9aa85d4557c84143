#include "server/idle_exit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(IdleTimerTest, IdleOnlyAfterTheDelayWithNoStream) {
  IdleTimer timer(absl::Seconds(5), kStart);
  EXPECT_FALSE(timer.Observe(kStart + absl::Seconds(4), 0));
  EXPECT_TRUE(timer.Observe(kStart + absl::Seconds(5), 0));
}

TEST(IdleTimerTest, AnOpenStreamRestartsTheDelay) {
  IdleTimer timer(absl::Seconds(5), kStart);
  EXPECT_FALSE(timer.Observe(kStart + absl::Seconds(4), 1));
  EXPECT_FALSE(timer.Observe(kStart + absl::Seconds(8), 0));
  EXPECT_TRUE(timer.Observe(kStart + absl::Seconds(9), 0));
}

TEST(IdleTimerTest, NeverIdleWhileAStreamIsOpen) {
  IdleTimer timer(absl::Seconds(1), kStart);
  EXPECT_FALSE(timer.Observe(kStart + absl::Hours(1), 3));
}

TEST(IdleExitTest, CallsOnIdleOnceTheStreamsHaveClosed) {
  std::atomic<size_t> open{1};
  std::atomic<int> calls{0};
  absl::Notification idle;
  IdleExit exit(absl::Milliseconds(50), [&] { return open.load(); },
                [&] {
                  ++calls;
                  idle.Notify();
                  return true;
                });
  exit.Start();
  EXPECT_FALSE(idle.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  open = 0;
  EXPECT_TRUE(idle.WaitForNotificationWithTimeout(absl::Seconds(30)));
  exit.Stop();
  EXPECT_EQ(calls.load(), 1);
}

TEST(IdleTimerTest, AResetCountsTheDelayAgain) {
  IdleTimer timer(absl::Seconds(5), kStart);
  EXPECT_TRUE(timer.Observe(kStart + absl::Seconds(5), 0));
  timer.Reset(kStart + absl::Seconds(5));
  EXPECT_FALSE(timer.Observe(kStart + absl::Seconds(9), 0));
  EXPECT_TRUE(timer.Observe(kStart + absl::Seconds(10), 0));
}

TEST(IdleExitTest, AsksAgainWhileOnIdleSaysTheDaemonIsInUse) {
  std::atomic<int> calls{0};
  absl::Notification stopped;
  IdleExit exit(absl::Milliseconds(10), [] { return size_t{0}; },
                [&] {
                  if (++calls < 3) return false;  // A client holds its lease.
                  stopped.Notify();
                  return true;
                });
  exit.Start();
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(30)));
  exit.Stop();
  EXPECT_EQ(calls.load(), 3);
}

TEST(IdleExitTest, StopEndsTheThreadOfABusyDaemon) {
  IdleExit exit(absl::Milliseconds(10), [] { return size_t{1}; },
                [] {
                  ADD_FAILURE() << "a busy daemon is not idle";
                  return true;
                });
  exit.Start();
  exit.Stop();
  exit.Stop();
}

TEST(IdleLeaseTest, TakenOnlyOnceNoClientHoldsIt) {
  const std::string path = ::testing::TempDir() + "/idle_lease_test.lease";
  unlink(path.c_str());
  const int client = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(client, 0);
  ASSERT_EQ(flock(client, LOCK_SH), 0);
  EXPECT_FALSE(TakeIdleLease(path));
  close(client);  // The client has gone.
  EXPECT_TRUE(TakeIdleLease(path));
  // Held now: a client that comes cannot take its shared lock.
  const int late = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(late, 0);
  EXPECT_NE(flock(late, LOCK_SH | LOCK_NB), 0);
  close(late);
}

}  // namespace
}  // namespace stoker
