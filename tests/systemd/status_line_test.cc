#include "server/systemd/status_line.h"

#include "gtest/gtest.h"

namespace stoker::systemd {
namespace {

metrics::DaemonStats Snapshot(double uptime, uint32_t open, int64_t samples,
                              int64_t bytes, int64_t busy_ns) {
  metrics::DaemonStats s;
  s.uptime_seconds = uptime;
  s.service.open_streams = open;
  metrics::LabelStats a;
  using service::Count;
  a.counts[Count::kSamples] = samples / 2;
  a.counts[Count::kBytes] = bytes / 2;
  metrics::LabelStats b;
  b.counts[Count::kSamples] = samples - a.counts[Count::kSamples];
  b.counts[Count::kBytes] = bytes - a.counts[Count::kBytes];
  s.labels = {a, b};
  s.pool.threads = 4;
  s.pool.busy_ns = busy_ns;
  return s;
}

TEST(StatusLineTest, FirstLineHasNoRatesYet) {
  StatusLine line;
  EXPECT_EQ(line.Next(Snapshot(1.0, 0, 0, 0, 0)),
            "0 streams open, 0 samples served since start");
}

TEST(StatusLineTest, RatesAreOverTheTimeBetweenCalls) {
  StatusLine line;
  line.Next(Snapshot(10.0, 1, 1000, 0, 0));
  // 2 s later: 3000 more samples, 8 MiB more, 4 threads busy 6 s in all.
  EXPECT_EQ(line.Next(Snapshot(12.0, 3, 4000, 8 << 20, 6'000'000'000)),
            "3 streams open, 1500 samples/s, 4.0 MiB/s, workers 75% busy, "
            "4000 samples served since start");
  EXPECT_EQ(line.Next(Snapshot(13.0, 1, 4000, 8 << 20, 6'000'000'000)),
            "1 stream open, 0 samples/s, 0.0 MiB/s, workers 0% busy, "
            "4000 samples served since start");
}

}  // namespace
}  // namespace stoker::systemd
