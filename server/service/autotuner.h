// Autotuner: picks the worker count and the default prefetch depth from what
// the daemon measures, as tf.data's AUTOTUNE does for its parallelism and
// buffer sizes. `workers: auto` and `prefetch: auto` in the config turn it on.
//
// Every period (half a second in stokerd) the tuner is fed one Measurement:
// the samples delivered, the worker pool's busy time, the time consumers
// waited for batches and the time they spent between requests (both from
// their acks), and how many cores other processes left free. It answers with
// a Decision. The rules, in order:
//
//   1. A probe is judged. After a change, the next period's rate is compared
//      with the rate before it: an extra worker must raise it by kGain, or it
//      is taken back and that count is not tried again for kHoldPeriods; a
//      worker taken away must not lower it by more than kGain, or it is given
//      back and the count below is not tried for kHoldPeriods.
//   2. Idle (no samples): nothing changes.
//   3. More workers than free cores (rounded; other processes took some)
//      for kBusyPeriods in a row: one worker less, as a probe, so the cores
//      go back to the trainer unless the rate drops by more than kGain
//      without it. One period is not enough: a trainer that starts (imports
//      torch, say) takes a core for a moment just as its stream begins.
//   4. The consumers stall (wait share above kStallHigh) and a core is free:
//      one more worker, as a probe.
//   5. The consumers never stall (wait share below kStallLow) and one worker
//      fewer would still be under kShrinkUtilization busy: one worker less,
//      as a probe. The freed core goes back to the trainer.
//   6. Prefetch: the consumers stall while the workers have slack
//      (utilization below kBurstUtilization) for kBurstPeriods in a row, each
//      with at least kMinAcks acknowledged batches (a short stream's start
//      looks like a stall and is not one a deeper queue fixes), so
//      batches come in bursts the queue cannot cover: kPrefetchStep deeper,
//      up to kMaxTunedPrefetch (and limits.max_prefetch). Calm for
//      kCalmPeriods in a row: one less, down to the minimum, to give memory
//      back. The depth applies to streams opened afterwards (a stream's ring
//      is sized when it opens), so its effect cannot be judged from the next
//      period's rate as a worker's can: the steps are small and capped
//      instead. A stall that comes from the transport (gRPC copying a large
//      batch) also leaves the workers idle; the cap bounds what that costs
//      in memory.
//
// Example: 2 cores, one trainer that wants more than the daemon makes. Start
// at 2 workers; the trainer stalls, no core is free, so 2 stays. The trainer
// slows down (its model got bigger): stall share 0, utilization 45% of 2
// workers, so 1 worker would be 90% busy: above kShrinkUtilization, keep 2.
// At 30%, 1 worker would be 60% busy: drop to 1, and keep it if the rate
// holds.
//
// Autotuner is plain logic with no clock and no threads, so tests feed it
// synthetic measurements. Not thread-safe: one caller (AutotuneThread).
#ifndef STOKER_SERVER_SERVICE_AUTOTUNER_H_
#define STOKER_SERVER_SERVICE_AUTOTUNER_H_

#include <cstdint>
#include <string>

namespace stoker::service {

struct AutotuneLimits {
  bool tune_workers = true;
  bool tune_prefetch = true;
  int max_workers = 1;  // Threads the pool has; the count never goes above.
  int min_workers = 1;
  int initial_workers = 1;
  uint32_t min_prefetch = 2;
  uint32_t max_prefetch = 64;
  uint32_t initial_prefetch = 4;
};

// One period, as deltas over the period.
struct AutotuneMeasurement {
  double seconds = 0;            // Wall time of the period.
  int64_t samples = 0;           // Delivered to consumers.
  double pool_busy_seconds = 0;  // Summed over worker threads.
  double wait_seconds = 0;       // Consumers waited for batches.
  double consumer_busy_seconds = 0;  // Consumers spent between requests.
  int64_t acks = 0;              // Acks the wait and busy figures came from.
  // Cores not used by other processes over the period (machine cores minus
  // their CPU seconds per second); negative when unknown.
  double free_cores = -1;
};

struct AutotuneDecision {
  int workers = 1;
  uint32_t prefetch = 4;
  // Why the last change was made, e.g. "stall 0.32, core free: +1 worker";
  // "hold" when nothing changed.
  std::string reason = "initial";
};

class Autotuner {
 public:
  static constexpr double kStallHigh = 0.05;
  static constexpr double kStallLow = 0.01;
  static constexpr double kGain = 0.05;
  static constexpr double kShrinkUtilization = 0.75;
  static constexpr double kBurstUtilization = 0.80;
  static constexpr int kHoldPeriods = 20;
  static constexpr int kCalmPeriods = 20;
  static constexpr int kBurstPeriods = 4;
  static constexpr int kBusyPeriods = 2;
  static constexpr int64_t kMinAcks = 16;
  static constexpr uint32_t kPrefetchStep = 2;
  static constexpr uint32_t kMaxTunedPrefetch = 16;

  explicit Autotuner(AutotuneLimits limits);

  AutotuneDecision Observe(const AutotuneMeasurement& m);
  const AutotuneDecision& current() const { return current_; }
  const AutotuneLimits& limits() const { return limits_; }

 private:
  enum class Probe { kNone, kUp, kDown };

  bool JudgeProbe(double rate);
  void TuneWorkers(const AutotuneMeasurement& m, double rate, double stall,
                   double utilization);
  void TunePrefetch(const AutotuneMeasurement& m, double stall,
                    double utilization);

  const AutotuneLimits limits_;
  AutotuneDecision current_;
  Probe probe_ = Probe::kNone;
  double rate_before_probe_ = 0;
  // Counts at or above `ceiling_` are not tried while ceiling_hold_ > 0; at
  // or below `floor_` not while floor_hold_ > 0.
  int ceiling_ = 0;
  int ceiling_hold_ = 0;
  int floor_ = 0;
  int floor_hold_ = 0;
  int calm_periods_ = 0;
  int burst_periods_ = 0;
  int busy_periods_ = 0;  // In a row with fewer free cores than workers.
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_AUTOTUNER_H_
