#include "server/idle_exit.h"

#include <atomic>
#include <cstddef>

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
                });
  exit.Start();
  EXPECT_FALSE(idle.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  open = 0;
  EXPECT_TRUE(idle.WaitForNotificationWithTimeout(absl::Seconds(30)));
  exit.Stop();
  EXPECT_EQ(calls.load(), 1);
}

TEST(IdleExitTest, StopEndsTheThreadOfABusyDaemon) {
  IdleExit exit(absl::Milliseconds(10), [] { return size_t{1}; },
                [] { ADD_FAILURE() << "a busy daemon is not idle"; });
  exit.Start();
  exit.Stop();
  exit.Stop();
}

}  // namespace
}  // namespace stoker
