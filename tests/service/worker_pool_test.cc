#include "server/pipeline/worker_pool.h"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stoker::pipeline {
namespace {

TEST(WorkerPoolTest, StopRunsEveryQueuedTask) {
  WorkerPool pool(2);
  pool.Start();
  std::atomic<int> ran{0};
  const WorkerPool::GroupId g = pool.AddGroup(1);
  for (int i = 0; i < 1000; ++i) pool.Submit(g, [&] { ++ran; });
  pool.Stop();
  EXPECT_EQ(ran, 1000);
  EXPECT_EQ(pool.GetStats().tasks_run, 1000);
}

// With one thread the order tasks run in is the scheduler's choice alone.
std::vector<int> RunOrder(double weight_a, double weight_b, int per_group) {
  WorkerPool pool(1);
  absl::Notification gate;
  std::vector<int> order;
  const WorkerPool::GroupId blocker = pool.AddGroup(1);
  pool.Submit(blocker, [&] { gate.WaitForNotification(); });
  pool.Start();
  const WorkerPool::GroupId a = pool.AddGroup(weight_a);
  const WorkerPool::GroupId b = pool.AddGroup(weight_b);
  for (int i = 0; i < per_group; ++i) {
    pool.Submit(a, [&] { order.push_back(0); });
    pool.Submit(b, [&] { order.push_back(1); });
  }
  gate.Notify();
  pool.Stop();
  return order;
}

TEST(WorkerPoolTest, EqualWeightsAlternateBetweenGroups) {
  std::vector<int> order = RunOrder(1, 1, 50);
  ASSERT_EQ(order.size(), 100u);
  int a_in_first_half = 0;
  for (int i = 0; i < 50; ++i) a_in_first_half += order[i] == 0;
  EXPECT_EQ(a_in_first_half, 25);
}

TEST(WorkerPoolTest, WeightsTwoToOneGiveTwiceTheShare) {
  std::vector<int> order = RunOrder(2, 1, 60);
  int a_in_first_60 = 0;
  for (int i = 0; i < 60; ++i) a_in_first_60 += order[i] == 0;
  EXPECT_EQ(a_in_first_60, 40);
}

TEST(WorkerPoolTest, AnIdleGroupBanksNoCredit) {
  WorkerPool pool(1);
  const WorkerPool::GroupId a = pool.AddGroup(1);
  const WorkerPool::GroupId b = pool.AddGroup(1);
  pool.Start();
  // a works alone for a while.
  absl::Notification a_done;
  std::atomic<int> a_ran{0};
  for (int i = 0; i < 30; ++i) {
    pool.Submit(a, [&] {
      if (++a_ran == 30) a_done.Notify();
    });
  }
  a_done.WaitForNotification();
  // Then both have work: b must share, not run its backlog first.
  absl::Notification gate;
  std::vector<int> order;
  pool.Submit(a, [&] { gate.WaitForNotification(); });
  for (int i = 0; i < 10; ++i) {
    pool.Submit(b, [&] { order.push_back(1); });
    pool.Submit(a, [&] { order.push_back(0); });
  }
  gate.Notify();
  pool.Stop();
  ASSERT_EQ(order.size(), 20u);
  int b_in_first_10 = 0;
  for (int i = 0; i < 10; ++i) b_in_first_10 += order[i];
  EXPECT_LE(b_in_first_10, 6);
}

// A weight of 1e-300 once made one task's step 1e300, and every later group
// started from there, where adding 1 changes nothing: fairness was gone for
// the daemon's life (equal jobs got 3.65:1).
TEST(WorkerPoolTest, ATinyWeightLeavesNoTraceOnLaterGroups) {
  WorkerPool pool(1);
  const WorkerPool::GroupId tiny = pool.AddGroup(1e-300);
  absl::Notification tiny_done;
  std::atomic<int> tiny_ran{0};
  for (int i = 0; i < 3; ++i) {
    pool.Submit(tiny, [&] {
      if (++tiny_ran == 3) tiny_done.Notify();
    });
  }
  pool.Start();
  tiny_done.WaitForNotification();
  pool.RemoveGroup(tiny);

  absl::Notification gate;
  std::vector<int> order;
  const WorkerPool::GroupId blocker = pool.AddGroup(1);
  pool.Submit(blocker, [&] { gate.WaitForNotification(); });
  const WorkerPool::GroupId a = pool.AddGroup(2);
  const WorkerPool::GroupId b = pool.AddGroup(1);
  for (int i = 0; i < 60; ++i) {
    pool.Submit(a, [&] { order.push_back(0); });
    pool.Submit(b, [&] { order.push_back(1); });
  }
  gate.Notify();
  pool.Stop();
  ASSERT_EQ(order.size(), 120u);
  int a_in_first_60 = 0;
  for (int i = 0; i < 60; ++i) a_in_first_60 += order[i] == 0;
  EXPECT_EQ(a_in_first_60, 40);
}

TEST(WorkerPoolTest, SetActiveThreadsClampsToThePool) {
  WorkerPool pool(3);
  EXPECT_EQ(pool.active_threads(), 3);
  pool.SetActiveThreads(0);
  EXPECT_EQ(pool.active_threads(), 1);
  pool.SetActiveThreads(99);
  EXPECT_EQ(pool.active_threads(), 3);
  EXPECT_EQ(pool.GetStats().active_threads, 3);
}

TEST(WorkerPoolTest, ParkedThreadsTakeNoTasks) {
  WorkerPool pool(4);
  pool.SetActiveThreads(1);
  pool.Start();
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> done{0};
  absl::Notification all_done;
  const WorkerPool::GroupId g = pool.AddGroup(1);
  for (int i = 0; i < 200; ++i) {
    pool.Submit(g, [&] {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      {
        absl::MutexLock lock(&mu);
        ids.insert(std::this_thread::get_id());
      }
      // Long enough that a second thread, if it took tasks, would overlap.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      --running;
      if (++done == 200) all_done.Notify();
    });
  }
  // Before Stop(), which lets parked threads help drain the queue.
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(ids.size(), 1u);
  pool.Stop();
}

TEST(WorkerPoolTest, RaisingTheCountWakesParkedThreads) {
  WorkerPool pool(3);
  pool.SetActiveThreads(1);
  pool.Start();
  pool.SetActiveThreads(3);
  // Three tasks that each wait for all three to run at once: only possible
  // with three active threads.
  std::atomic<int> arrived{0};
  std::atomic<int> met{0};
  absl::Notification all_in;
  const WorkerPool::GroupId g = pool.AddGroup(1);
  for (int i = 0; i < 3; ++i) {
    pool.Submit(g, [&] {
      if (++arrived == 3) all_in.Notify();
      if (all_in.WaitForNotificationWithTimeout(absl::Seconds(30))) ++met;
    });
  }
  pool.Stop();
  EXPECT_EQ(met.load(), 3);
}

TEST(WorkerPoolTest, StopRunsEveryQueuedTaskWithParkedThreads) {
  WorkerPool pool(4);
  pool.SetActiveThreads(1);
  std::atomic<int> ran{0};
  const WorkerPool::GroupId g = pool.AddGroup(1);
  for (int i = 0; i < 500; ++i) pool.Submit(g, [&] { ++ran; });
  pool.Start();
  pool.Stop();
  EXPECT_EQ(ran, 500);
}

}  // namespace
}  // namespace stoker::pipeline
