#include "server/storage/retry.h"

#include "gtest/gtest.h"
#include "server/storage/http_client.h"

namespace stoker::storage {
namespace {

TEST(RetryTest, RetriesServerErrorsThrottlingAndTimeoutsOnly) {
  for (long s : {500L, 502L, 503L, 504L, 408L, 429L}) {
    EXPECT_TRUE(IsRetryableStatus(s)) << s;
  }
  for (long s : {200L, 206L, 400L, 403L, 404L, 416L}) {
    EXPECT_FALSE(IsRetryableStatus(s)) << s;
  }
}

TEST(RetryTest, WaitsDoubleUpToTheCapWithJitterInTheUpperHalf) {
  RetryPolicy p;
  p.first_wait = absl::Milliseconds(100);
  p.max_wait = absl::Seconds(1);
  EXPECT_EQ(RetryWait(p, 1, 0.999999), absl::Milliseconds(100) * 0.9999995);
  EXPECT_EQ(RetryWait(p, 1, 0.0), absl::Milliseconds(50));
  EXPECT_EQ(RetryWait(p, 2, 0.0), absl::Milliseconds(100));
  EXPECT_EQ(RetryWait(p, 3, 0.0), absl::Milliseconds(200));
  EXPECT_EQ(RetryWait(p, 5, 0.0), absl::Milliseconds(500));
  EXPECT_EQ(RetryWait(p, 60, 0.0), absl::Milliseconds(500));
}

TEST(RetryTest, NamesTheCommonStatuses) {
  EXPECT_STREQ(HttpReason(503), "Service Unavailable");
  EXPECT_STREQ(HttpReason(299), "");
}

}  // namespace
}  // namespace stoker::storage
