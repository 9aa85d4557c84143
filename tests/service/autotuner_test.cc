#include "server/service/autotuner.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::service {
namespace {

using ::testing::HasSubstr;

AutotuneLimits Limits(int max_workers, int initial_workers) {
  AutotuneLimits l;
  l.max_workers = max_workers;
  l.initial_workers = initial_workers;
  l.min_prefetch = 2;
  l.max_prefetch = 16;
  l.initial_prefetch = 4;
  return l;
}

// One second in which `rate` samples/s were delivered, the workers were
// `busy_workers` threads' worth of busy, and the consumers waited `stall` of
// their time.
AutotuneMeasurement Period(double rate, double busy_workers, double stall,
                           double free_cores = -1) {
  AutotuneMeasurement m;
  m.seconds = 1.0;
  m.samples = static_cast<int64_t>(rate);
  m.pool_busy_seconds = busy_workers;
  m.wait_seconds = stall;
  m.consumer_busy_seconds = 1.0 - stall;
  m.acks = 20;
  m.free_cores = free_cores;
  return m;
}

TEST(AutotunerTest, StartsAtTheInitialSettingsWithinLimits) {
  Autotuner t(Limits(4, 9));
  EXPECT_EQ(t.current().workers, 4);
  EXPECT_EQ(t.current().prefetch, 4u);
}

TEST(AutotunerTest, StallingConsumerWithAFreeCoreGetsAnotherWorker) {
  Autotuner t(Limits(4, 2));
  AutotuneDecision d = t.Observe(Period(1000, 2.0, 0.5, 4.0));
  EXPECT_EQ(d.workers, 3);
  EXPECT_THAT(d.reason, HasSubstr("+1 worker"));
}

TEST(AutotunerTest, ProbeUpThatRaisesTheRateIsKeptAndClimbingGoesOn) {
  Autotuner t(Limits(4, 2));
  t.Observe(Period(1000, 2.0, 0.5, 4.0));
  AutotuneDecision d = t.Observe(Period(1500, 3.0, 0.3, 4.0));
  EXPECT_EQ(d.workers, 3);
  EXPECT_THAT(d.reason, HasSubstr("kept"));
  d = t.Observe(Period(1500, 3.0, 0.3, 4.0));
  EXPECT_EQ(d.workers, 4);
}

TEST(AutotunerTest, ProbeUpWithoutGainIsTakenBackAndNotRetriedDuringHold) {
  Autotuner t(Limits(4, 2));
  t.Observe(Period(1000, 2.0, 0.5, 4.0));
  AutotuneDecision d = t.Observe(Period(1010, 3.0, 0.5, 4.0));
  EXPECT_EQ(d.workers, 2);
  EXPECT_THAT(d.reason, HasSubstr("probe up failed"));
  for (int i = 0; i < Autotuner::kHoldPeriods - 1; ++i) {
    d = t.Observe(Period(1000, 2.0, 0.5, 4.0));
    ASSERT_EQ(d.workers, 2) << "period " << i;
  }
  d = t.Observe(Period(1000, 2.0, 0.5, 4.0));
  EXPECT_EQ(d.workers, 3) << "the hold is over: probe again";
}

TEST(AutotunerTest, ConsumerBoundStreamGivesIdleWorkersBack) {
  Autotuner t(Limits(4, 4));
  // A slow trainer: 400 samples/s, the workers 0.8 threads' worth busy.
  AutotuneDecision d = t.Observe(Period(400, 0.8, 0.0, 4.0));
  EXPECT_EQ(d.workers, 3);
  EXPECT_THAT(d.reason, HasSubstr("-1 worker"));
  d = t.Observe(Period(400, 0.8, 0.0, 4.0));  // Rate held: kept.
  EXPECT_EQ(d.workers, 3);
  d = t.Observe(Period(400, 0.8, 0.0, 4.0));
  EXPECT_EQ(d.workers, 2);
  t.Observe(Period(400, 0.8, 0.0, 4.0));
  // 0.8 busy on 1 worker would be above kShrinkUtilization: stays at 2.
  for (int i = 0; i < 5; ++i) d = t.Observe(Period(400, 0.8, 0.0, 4.0));
  EXPECT_EQ(d.workers, 2);
}

TEST(AutotunerTest, ProbeDownThatCostsRateIsUndone) {
  Autotuner t(Limits(4, 2));
  t.Observe(Period(400, 0.5, 0.0, 4.0));
  EXPECT_EQ(t.current().workers, 1);
  AutotuneDecision d = t.Observe(Period(300, 0.9, 0.0, 4.0));
  EXPECT_EQ(d.workers, 2);
  EXPECT_THAT(d.reason, HasSubstr("probe down failed"));
  d = t.Observe(Period(400, 0.5, 0.0, 4.0));
  EXPECT_EQ(d.workers, 2) << "held after a failed probe down";
}

TEST(AutotunerTest, BusyMachineTakesAWorkerAwayUnlessTheRateSuffers) {
  Autotuner t(Limits(2, 2));
  // Another process uses a whole core: one free, two periods in a row.
  AutotuneDecision d = t.Observe(Period(1000, 2.0, 0.5, 1.0));
  EXPECT_EQ(d.workers, 2);
  d = t.Observe(Period(1000, 2.0, 0.5, 1.0));
  EXPECT_EQ(d.workers, 1);
  EXPECT_THAT(d.reason, HasSubstr("free cores"));
  // Rate held: the core stays with the other process.
  d = t.Observe(Period(980, 1.0, 0.5, 1.0));
  EXPECT_EQ(d.workers, 1);
  // The next time it costs half the rate, so it is undone.
  Autotuner u(Limits(2, 2));
  u.Observe(Period(1000, 2.0, 0.5, 1.0));
  u.Observe(Period(1000, 2.0, 0.5, 1.0));
  d = u.Observe(Period(500, 1.0, 0.5, 1.0));
  EXPECT_EQ(d.workers, 2);
}

TEST(AutotunerTest, AMomentaryBusyCoreTakesNoWorkerAway) {
  // A trainer starting up (importing torch) takes a core for one period as
  // its stream begins; the next period the core is free again.
  Autotuner t(Limits(2, 2));
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(t.Observe(Period(1000, 2.0, 0.5, 1.0)).workers, 2);
    ASSERT_EQ(t.Observe(Period(1000, 2.0, 0.5, 2.0)).workers, 2);
  }
}

TEST(AutotunerTest, IdlePeriodsChangeNothing) {
  Autotuner t(Limits(4, 3));
  for (int i = 0; i < 50; ++i) {
    AutotuneDecision d = t.Observe(Period(0, 0.0, 0.0, 4.0));
    ASSERT_EQ(d.workers, 3);
    ASSERT_EQ(d.prefetch, 4u);
  }
}

TEST(AutotunerTest, PrefetchGrowsWhenConsumersStallWhileWorkersHaveSlack) {
  AutotuneLimits l = Limits(2, 2);
  l.max_prefetch = 64;
  l.tune_workers = false;
  Autotuner t(l);
  for (int i = 0; i < Autotuner::kBurstPeriods - 1; ++i) {
    ASSERT_EQ(t.Observe(Period(800, 1.0, 0.3)).prefetch, 4u) << "period " << i;
  }
  EXPECT_EQ(t.Observe(Period(800, 1.0, 0.3)).prefetch,
            4u + Autotuner::kPrefetchStep);
  // A calm period in between starts the count again.
  t.Observe(Period(800, 1.0, 0.0));
  for (int i = 0; i < Autotuner::kBurstPeriods - 1; ++i) {
    t.Observe(Period(800, 1.0, 0.3));
  }
  EXPECT_EQ(t.current().prefetch, 4u + Autotuner::kPrefetchStep);
  for (int i = 0; i < 100 * Autotuner::kBurstPeriods; ++i) {
    t.Observe(Period(800, 1.0, 0.3));
  }
  EXPECT_EQ(t.current().prefetch, Autotuner::kMaxTunedPrefetch)
      << "capped, though max_prefetch is 64";
  EXPECT_EQ(t.current().workers, 2) << "tune_workers is off";
}

TEST(AutotunerTest, PrefetchIgnoresStallsOfFewBatches) {
  AutotuneLimits l = Limits(2, 2);
  l.tune_workers = false;
  Autotuner t(l);
  for (int i = 0; i < 10 * Autotuner::kBurstPeriods; ++i) {
    AutotuneMeasurement m = Period(800, 1.0, 0.9);
    m.acks = Autotuner::kMinAcks - 1;
    ASSERT_EQ(t.Observe(m).prefetch, 4u);
  }
}

TEST(AutotunerTest, PrefetchNeverExceedsMaxPrefetch) {
  AutotuneLimits l = Limits(2, 2);
  l.max_prefetch = 5;
  l.tune_workers = false;
  Autotuner t(l);
  for (int i = 0; i < 100; ++i) t.Observe(Period(800, 1.0, 0.3));
  EXPECT_EQ(t.current().prefetch, 5u);
}

TEST(AutotunerTest, PrefetchStaysWhenTheWorkersAreTheBottleneck) {
  AutotuneLimits l = Limits(2, 2);
  l.tune_workers = false;
  Autotuner t(l);
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(t.Observe(Period(1000, 1.95, 0.6)).prefetch, 4u);
  }
}

TEST(AutotunerTest, PrefetchShrinksAfterCalmPeriodsDownToTheMinimum) {
  AutotuneLimits l = Limits(2, 2);
  l.tune_workers = false;
  Autotuner t(l);
  for (int i = 0; i < Autotuner::kCalmPeriods - 1; ++i) {
    ASSERT_EQ(t.Observe(Period(500, 1.0, 0.0)).prefetch, 4u);
  }
  EXPECT_EQ(t.Observe(Period(500, 1.0, 0.0)).prefetch, 3u);
  for (int i = 0; i < 10 * Autotuner::kCalmPeriods; ++i) {
    t.Observe(Period(500, 1.0, 0.0));
  }
  EXPECT_EQ(t.current().prefetch, 2u);
}

// A closed loop: a machine with `cores` cores, each worker making 500
// samples/s while it has a core of its own, and a consumer that takes up to
// `demand` samples/s. `free_cores` is what the tuner is told (-1: unknown).
int Converge(int cores, int max_workers, double demand, int initial,
             double free_cores) {
  Autotuner t(Limits(max_workers, initial));
  int w = t.current().workers;
  for (int i = 0; i < 200; ++i) {
    const double made = 500.0 * std::min(w, cores);
    const double rate = std::min(made, demand);
    const double busy = rate / 500.0;  // Worker-seconds actually working.
    const double stall = made < demand ? 1.0 - made / demand : 0.0;
    w = t.Observe(Period(rate, busy, stall, free_cores)).workers;
  }
  return w;
}

TEST(AutotunerTest, ClosedLoopSettlesAtTheFreeCoresWhenProducerBound) {
  for (int initial : {1, 2, 8}) {
    EXPECT_EQ(Converge(/*cores=*/4, /*max_workers=*/8, 1e9, initial,
                       /*free_cores=*/4.0),
              4)
        << "from " << initial;
  }
}

TEST(AutotunerTest, ClosedLoopFindsTheCoreCountFromTheRateAlone) {
  // Free cores unknown: it climbs while a worker adds rate, and a fifth
  // worker adds none, so it is tried only now and then.
  const int w = Converge(/*cores=*/4, /*max_workers=*/8, 1e9, 1, -1);
  EXPECT_GE(w, 4);
  EXPECT_LE(w, 5);
}

TEST(AutotunerTest, ClosedLoopMatchesASlowConsumer) {
  // 1200 samples/s keep 2.4 workers busy; 4 keep each under
  // kShrinkUtilization, 3 would not.
  EXPECT_EQ(Converge(/*cores=*/8, /*max_workers=*/8, 1200, 8, 8.0), 4);
}

}  // namespace
}  // namespace stoker::service
