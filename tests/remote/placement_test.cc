// PlacementPolicy: local first; helpers only while the pool has been
// saturated, off again once it keeps up, and only for streams that need
// help. Time is passed in: no sleeps.
#include "server/remote/placement.h"

#include "gtest/gtest.h"

namespace stoker::remote {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

absl::Time At(int ms) { return kT0 + absl::Milliseconds(ms); }

service::ChunkRequest Stalled(double share) {
  service::ChunkRequest r;
  r.stall_share = share;
  return r;
}

TEST(PlacementPolicyTest, TurnsOnOnlyAfterTheSaturationHasLasted) {
  PlacementPolicy p({});
  EXPECT_FALSE(p.Sample(At(0), true));
  EXPECT_FALSE(p.Sample(At(150), true));
  EXPECT_FALSE(p.remote());
  EXPECT_FALSE(p.Wants(Stalled(1.0)));
  EXPECT_TRUE(p.Sample(At(200), true));
  EXPECT_TRUE(p.remote());
  EXPECT_TRUE(p.Wants(Stalled(1.0)));
}

TEST(PlacementPolicyTest, ABreakInTheSaturationStartsTheWaitAgain) {
  PlacementPolicy p({});
  p.Sample(At(0), true);
  p.Sample(At(150), false);
  p.Sample(At(160), true);
  p.Sample(At(300), true);
  EXPECT_FALSE(p.remote());
  p.Sample(At(360), true);
  EXPECT_TRUE(p.remote());
}

TEST(PlacementPolicyTest, StaysOnThroughShortLullsAndTurnsOffWhenThePoolKeepsUp) {
  PlacementPolicy p({});
  p.Sample(At(0), true);
  p.Sample(At(200), true);
  ASSERT_TRUE(p.remote());
  // Helpers drain the local queue now and then: not yet a reason to stop.
  p.Sample(At(300), false);
  p.Sample(At(900), false);
  p.Sample(At(950), true);
  p.Sample(At(1900), false);
  EXPECT_TRUE(p.remote());
  EXPECT_TRUE(p.Sample(At(2900), false));
  EXPECT_FALSE(p.remote());
  EXPECT_FALSE(p.Wants(Stalled(1.0)));
}

TEST(PlacementPolicyTest, OnlyAStreamThatWaitsOrHasNothingReadyGetsHelp) {
  PlacementPolicy::Options o;
  o.saturated_for = absl::ZeroDuration();
  o.stall_share = 0.05;
  PlacementPolicy p(o);
  p.Sample(At(0), true);
  ASSERT_TRUE(p.remote());
  EXPECT_FALSE(p.Wants(Stalled(0.0)));
  EXPECT_FALSE(p.Wants(Stalled(0.05)));
  EXPECT_TRUE(p.Wants(Stalled(0.06)));
  service::ChunkRequest starved;
  starved.starved = true;
  EXPECT_TRUE(p.Wants(starved));
}

}  // namespace
}  // namespace stoker::remote
