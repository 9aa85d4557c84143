#include "server/staging/stage_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::staging {
namespace {

TEST(StageStatusTest, DescribesProgressWithRateAndEta) {
  StageStatus s;
  s.state = StageStatus::State::kCopying;
  s.bytes_total = 4 << 20;
  s.bytes_done = 1 << 20;
  s.rate = 1 << 20;
  EXPECT_EQ(DescribeProgress(s), "25.0% (1.0 MiB of 4.0 MiB), 1.0 MiB/s, ETA 0:03");
  s.rate = 0;
  EXPECT_THAT(DescribeProgress(s), ::testing::EndsWith("ETA --:--"));
  s.state = StageStatus::State::kWaiting;
  s.path = "/nvme/train";
  EXPECT_EQ(DescribeProgress(s),
            "waiting for another process that is staging /nvme/train");
}

TEST(StageStatusTest, ClassifiesErrorsByHttpStatus) {
  EXPECT_EQ(ErrorClass(absl::UnavailableError(
                "GET http://h/d/manifest.json: HTTP 503 Service Unavailable")),
            "503");
  EXPECT_EQ(ErrorClass(absl::PermissionDeniedError(
                "GET http://h/d/x: HTTP 403 Forbidden (AccessDenied: no)")),
            "403");
  EXPECT_EQ(ErrorClass(absl::UnavailableError("GET http://h/d/x: connection "
                                              "refused")),
            "transport");
  EXPECT_EQ(ErrorClass(absl::DataLossError("shard shard-00001.lmdb: digest")),
            "data_loss");
}

}  // namespace
}  // namespace stoker::staging
