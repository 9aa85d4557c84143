#include "server/dataset/sampler.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

Sampler Make(uint64_t n, uint32_t batch, uint32_t rank, uint32_t world,
             bool drop_last, uint64_t seed = 1) {
  absl::StatusOr<Sampler> s =
      Sampler::Create({n, seed, batch, rank, world, drop_last});
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// Every id that the ranks of a job receive in one epoch, in the order of
// (step, rank).
std::vector<uint64_t> WholeEpoch(uint64_t n, uint32_t batch, uint32_t world,
                                 bool drop_last, uint64_t epoch) {
  std::vector<Sampler> ranks;
  uint64_t steps = 0;
  for (uint32_t r = 0; r < world; ++r) {
    ranks.push_back(Make(n, batch, r, world, drop_last));
    steps = std::max(steps, ranks.back().StepsPerEpoch());
  }
  std::vector<uint64_t> all;
  for (uint64_t step = 0; step < steps; ++step) {
    for (Sampler& s : ranks) {
      if (step >= s.StepsPerEpoch()) continue;
      const std::vector<uint64_t> ids = s.StepSamples(epoch, step);
      EXPECT_LE(ids.size(), batch);
      all.insert(all.end(), ids.begin(), ids.end());
    }
  }
  return all;
}

TEST(EpochPermutationTest, GoldenValuesPinTheGenerator) {
  // If this fails, the generator changed: every stored position and every
  // resumed stream would see other samples. Change it only on purpose.
  EXPECT_THAT(EpochPermutation(10, 42, 0),
              ElementsAre(5, 1, 4, 8, 6, 3, 9, 2, 0, 7));
  const std::vector<uint64_t> large = EpochPermutation(100000, 7, 3);
  EXPECT_THAT(std::vector<uint64_t>(large.begin(), large.begin() + 5),
              ElementsAre(81896, 35323, 42051, 66631, 43629));
  EXPECT_THAT(std::vector<uint64_t>(large.end() - 3, large.end()),
              ElementsAre(3403, 89309, 39303));
}

TEST(EpochPermutationTest, IsAPermutation) {
  for (uint64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<uint64_t> p = EpochPermutation(n, 3, 5);
    std::sort(p.begin(), p.end());
    std::vector<uint64_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(p, identity) << "n=" << n;
  }
}

TEST(EpochPermutationTest, IsAPureFunctionOfItsInputs) {
  EXPECT_EQ(EpochPermutation(500, 9, 2), EpochPermutation(500, 9, 2));
}

TEST(EpochPermutationTest, DiffersPerEpochAndPerSeed) {
  const std::vector<uint64_t> base = EpochPermutation(500, 9, 2);
  EXPECT_NE(EpochPermutation(500, 9, 3), base);
  EXPECT_NE(EpochPermutation(500, 10, 2), base);
  // Epochs 0..19 are all different orders.
  std::vector<std::vector<uint64_t>> epochs;
  for (uint64_t e = 0; e < 20; ++e)
    epochs.push_back(EpochPermutation(50, 1, e));
  std::sort(epochs.begin(), epochs.end());
  EXPECT_EQ(std::unique(epochs.begin(), epochs.end()), epochs.end());
}

TEST(EpochPermutationTest, MovesEveryIdToEveryPlaceEvenly) {
  // 4000 shuffles of 4 ids: each (id, place) pair should occur ~1000 times.
  uint64_t counts[4][4] = {};
  for (uint64_t e = 0; e < 4000; ++e) {
    const std::vector<uint64_t> p = EpochPermutation(4, 77, e);
    for (int place = 0; place < 4; ++place) ++counts[p[place]][place];
  }
  for (auto& row : counts) {
    for (uint64_t c : row) {
      EXPECT_GT(c, 880u);
      EXPECT_LT(c, 1120u);
    }
  }
}

TEST(SamplerTest, FollowsTheWorkedExampleOfTheHeader) {
  // N = 10, B = 2, W = 3.
  const std::vector<uint64_t> p = EpochPermutation(10, 1, 0);
  Sampler r0 = Make(10, 2, 0, 3, false), r1 = Make(10, 2, 1, 3, false),
          r2 = Make(10, 2, 2, 3, false);
  EXPECT_THAT(r0.StepSamples(0, 0), ElementsAre(p[0], p[1]));
  EXPECT_THAT(r1.StepSamples(0, 0), ElementsAre(p[2], p[3]));
  EXPECT_THAT(r2.StepSamples(0, 0), ElementsAre(p[4], p[5]));
  EXPECT_THAT(r0.StepSamples(0, 1), ElementsAre(p[6], p[7]));
  EXPECT_THAT(r1.StepSamples(0, 1), ElementsAre(p[8], p[9]));
  EXPECT_EQ(r0.StepsPerEpoch(), 2u);
  EXPECT_EQ(r1.StepsPerEpoch(), 2u);
  EXPECT_EQ(r2.StepsPerEpoch(), 1u);
  EXPECT_EQ(r2.SamplesPerEpoch(), 2u);
  Sampler d2 = Make(10, 2, 2, 3, true);
  EXPECT_EQ(d2.StepsPerEpoch(), 1u);
  EXPECT_THAT(d2.StepSamples(0, 0), ElementsAre(p[4], p[5]));
}

TEST(SamplerTest, RanksTogetherReceiveEverySampleExactlyOncePerEpoch) {
  for (uint32_t world : {1, 3, 4}) {
    for (uint32_t batch : {1, 2, 5}) {
      for (uint64_t n : {1, 7, 10, 23, 24, 60}) {
        for (uint64_t epoch : {0, 1}) {
          std::vector<uint64_t> got =
              WholeEpoch(n, batch, world, /*drop_last=*/false, epoch);
          // Concatenated in (step, rank) order they are the permutation.
          EXPECT_EQ(got, EpochPermutation(n, 1, epoch))
              << "n=" << n << " B=" << batch << " W=" << world;
        }
      }
    }
  }
}

TEST(SamplerTest, DropLastLeavesOutOnlyTheTail) {
  for (uint32_t world : {1, 3, 4}) {
    for (uint32_t batch : {1, 2, 5}) {
      for (uint64_t n : {23, 24, 60, 61}) {
        const uint64_t global = uint64_t{world} * batch;
        if (n < global) continue;
        const std::vector<uint64_t> p = EpochPermutation(n, 1, 0);
        const std::vector<uint64_t> head(p.begin(),
                                         p.begin() + n / global * global);
        EXPECT_EQ(WholeEpoch(n, batch, world, /*drop_last=*/true, 0), head)
            << "n=" << n << " B=" << batch << " W=" << world;
      }
    }
  }
}

TEST(SamplerTest, SplitsTheLastStepSoSomeRanksGetFewerOrNone) {
  // N = 5, B = 4, W = 4: no full step; R = 5 splits as 2, 2, 1, 0.
  const std::vector<uint64_t> p = EpochPermutation(5, 1, 0);
  std::vector<uint64_t> sizes;
  for (uint32_t r = 0; r < 4; ++r) {
    Sampler s = Make(5, 4, r, 4, false);
    sizes.push_back(s.SamplesPerEpoch());
    if (r == 3) {
      EXPECT_EQ(s.StepsPerEpoch(), 0u);
    } else {
      EXPECT_EQ(s.StepsPerEpoch(), 1u);
    }
  }
  EXPECT_THAT(sizes, ElementsAre(2, 2, 1, 0));
  EXPECT_THAT(Make(5, 4, 2, 4, false).StepSamples(0, 0), ElementsAre(p[4]));
}

TEST(SamplerTest, SharesTheCachedPermutationOfTheCurrentEpoch) {
  Sampler s = Make(100, 10, 0, 1, false);
  const auto first = s.Permutation(3);
  EXPECT_EQ(s.Permutation(3), first);
  EXPECT_THAT(*first, ElementsAreArray(EpochPermutation(100, 1, 3)));
  EXPECT_NE(s.Permutation(4), first);
}

TEST(SamplerDeathTest, StepSamplesAbortsOnAStepPastTheEpoch) {
  Sampler s = Make(10, 2, 2, 3, false);
  EXPECT_DEATH(s.StepSamples(0, 1), "step 1 of 1");
}

TEST(SamplerTest, CreateRejectsBadOptionsNamingTheField) {
  auto error = [](SamplerOptions o) {
    return Sampler::Create(o).status().ToString();
  };
  EXPECT_EQ(error({0, 1, 4, 0, 1, false}),
            "INVALID_ARGUMENT: num_samples is 0 (empty dataset)");
  EXPECT_EQ(error({10, 1, 0, 0, 1, false}),
            "INVALID_ARGUMENT: batch_size is 0");
  EXPECT_EQ(error({10, 1, 4, 0, 0, false}),
            "INVALID_ARGUMENT: world_size is 0");
  EXPECT_EQ(error({10, 1, 4, 2, 2, false}),
            "INVALID_ARGUMENT: rank 2 is not below world_size 2");
  EXPECT_EQ(error({10, 1, 4, 0, 3, true}),
            "INVALID_ARGUMENT: drop_last with num_samples 10 below "
            "world_size*batch_size 12 leaves no step");
}

}  // namespace
}  // namespace stoker::dataset
