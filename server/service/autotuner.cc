#include "server/service/autotuner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace stoker::service {

namespace {

// The limits made consistent: at least one worker and one batch of prefetch,
// minimums no larger than maximums.
AutotuneLimits Sane(AutotuneLimits l) {
  l.max_workers = std::max(1, l.max_workers);
  l.min_workers = std::clamp(l.min_workers, 1, l.max_workers);
  l.max_prefetch = std::max<uint32_t>(1, l.max_prefetch);
  l.min_prefetch = std::clamp<uint32_t>(l.min_prefetch, 1, l.max_prefetch);
  return l;
}

}  // namespace

Autotuner::Autotuner(AutotuneLimits limits) : limits_(Sane(limits)) {
  current_.workers = std::clamp(limits_.initial_workers, limits_.min_workers,
                                limits_.max_workers);
  current_.prefetch = std::clamp(limits_.initial_prefetch,
                                 limits_.min_prefetch, limits_.max_prefetch);
}

AutotuneDecision Autotuner::Observe(const AutotuneMeasurement& m) {
  if (ceiling_hold_ > 0) --ceiling_hold_;
  if (floor_hold_ > 0) --floor_hold_;
  if (m.seconds <= 0 || m.samples <= 0) {
    // Idle: a probe cannot be judged without traffic, so it is dropped.
    probe_ = Probe::kNone;
    calm_periods_ = 0;
    burst_periods_ = 0;
    busy_periods_ = 0;
    current_.reason = "hold: idle";
    return current_;
  }
  const double rate = m.samples / m.seconds;
  const double consumer = m.wait_seconds + m.consumer_busy_seconds;
  const double stall = consumer > 0 ? m.wait_seconds / consumer : 0.0;
  const double utilization =
      m.pool_busy_seconds / (current_.workers * m.seconds);
  current_.reason = "hold";
  if (limits_.tune_workers && !JudgeProbe(rate)) {
    TuneWorkers(m, rate, stall, utilization);
  }
  if (limits_.tune_prefetch) TunePrefetch(m, stall, utilization);
  return current_;
}

bool Autotuner::JudgeProbe(double rate) {
  const Probe probe = probe_;
  probe_ = Probe::kNone;
  if (probe == Probe::kUp) {
    if (rate < rate_before_probe_ * (1 + kGain)) {
      ceiling_ = current_.workers;
      ceiling_hold_ = kHoldPeriods;
      --current_.workers;
      current_.reason = absl::StrFormat(
          "probe up failed (%.0f -> %.0f samples/s): -1 worker",
          rate_before_probe_, rate);
    } else {
      current_.reason = absl::StrFormat(
          "probe up kept (%.0f -> %.0f samples/s)", rate_before_probe_, rate);
    }
    return true;
  }
  if (probe == Probe::kDown) {
    if (rate < rate_before_probe_ * (1 - kGain)) {
      floor_ = current_.workers;
      floor_hold_ = kHoldPeriods;
      ++current_.workers;
      current_.reason = absl::StrFormat(
          "probe down failed (%.0f -> %.0f samples/s): +1 worker",
          rate_before_probe_, rate);
    } else {
      current_.reason = absl::StrFormat(
          "probe down kept (%.0f -> %.0f samples/s)", rate_before_probe_,
          rate);
    }
    return true;
  }
  return false;
}

void Autotuner::TuneWorkers(const AutotuneMeasurement& m, double rate,
                            double stall, double utilization) {
  int& w = current_.workers;
  // Cores this daemon may use: the free ones, at least one.
  int usable = limits_.max_workers;
  if (m.free_cores >= 0) {
    usable = std::clamp(static_cast<int>(std::floor(m.free_cores + 0.5)),
                        limits_.min_workers, limits_.max_workers);
  }
  const bool blocked_down = floor_hold_ > 0 && w - 1 <= floor_;
  busy_periods_ = w > usable ? busy_periods_ + 1 : 0;
  if (busy_periods_ >= kBusyPeriods && !blocked_down) {
    busy_periods_ = 0;
    rate_before_probe_ = rate;
    probe_ = Probe::kDown;
    --w;
    current_.reason = absl::StrFormat(
        "%.2f free cores: -1 worker (probe)", m.free_cores);
    return;
  }
  const bool blocked_up = ceiling_hold_ > 0 && w + 1 >= ceiling_;
  if (stall > kStallHigh && w < usable && !blocked_up) {
    rate_before_probe_ = rate;
    probe_ = Probe::kUp;
    ++w;
    current_.reason =
        absl::StrFormat("stall %.2f, core free: +1 worker (probe)", stall);
    return;
  }
  const double busy_workers = utilization * w;
  if (stall < kStallLow && w > limits_.min_workers && !blocked_down &&
      busy_workers < (w - 1) * kShrinkUtilization) {
    rate_before_probe_ = rate;
    probe_ = Probe::kDown;
    --w;
    current_.reason = absl::StrFormat(
        "no stall, %.2f of %d workers busy: -1 worker (probe)", busy_workers,
        w + 1);
  }
}

void Autotuner::TunePrefetch(const AutotuneMeasurement& m, double stall,
                             double utilization) {
  uint32_t& p = current_.prefetch;
  const uint32_t ceiling = std::min(limits_.max_prefetch, kMaxTunedPrefetch);
  if (stall > kStallHigh && utilization < kBurstUtilization &&
      m.acks >= kMinAcks) {
    calm_periods_ = 0;
    if (++burst_periods_ >= kBurstPeriods && p < ceiling) {
      burst_periods_ = 0;
      p = std::min(ceiling, p + kPrefetchStep);
      current_.reason += absl::StrFormat(
          "; stall %.2f with workers %.0f%% busy: prefetch %u", stall,
          utilization * 100, p);
    }
    return;
  }
  burst_periods_ = 0;
  if (stall < kStallLow) {
    if (++calm_periods_ >= kCalmPeriods && p > limits_.min_prefetch) {
      calm_periods_ = 0;
      --p;
      current_.reason += absl::StrFormat("; calm: prefetch %u", p);
    }
  } else {
    calm_periods_ = 0;
  }
}

}  // namespace stoker::service
