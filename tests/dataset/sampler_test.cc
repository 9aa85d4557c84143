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
  EXPECT_EQ(error({10, 1, 4, 0, 1, false, 0}),
            "INVALID_ARGUMENT: ra_reps 0 is outside 1..64");
  EXPECT_EQ(error({10, 1, 4, 0, 1, false, 65}),
            "INVALID_ARGUMENT: ra_reps 65 is outside 1..64");
  EXPECT_EQ(error({2, 1, 4, 0, 3, true, 4}),
            "INVALID_ARGUMENT: drop_last with num_samples 2 * ra_reps 4 below "
            "world_size*batch_size 12 leaves no step");
  EXPECT_TRUE(Sampler::Create({3, 1, 4, 0, 3, true, 4}).ok());
  EXPECT_TRUE(Sampler::Create({10, 1, 4, 0, 1, false, 64}).ok());
}

// Repeated augmentation (ra_reps = k).

struct Entry {
  uint64_t id;
  uint32_t rep;
  uint32_t rank;
  uint64_t step;
};

// Every entry the ranks of a job receive in one epoch with ra_reps = k, in
// the order of (step, rank, position in the batch).
std::vector<Entry> WholeRaEpoch(uint64_t n, uint32_t batch, uint32_t world,
                                uint32_t k, bool drop_last, uint64_t epoch) {
  std::vector<Sampler> ranks;
  uint64_t steps = 0;
  for (uint32_t r = 0; r < world; ++r) {
    absl::StatusOr<Sampler> s =
        Sampler::Create({n, 1, batch, r, world, drop_last, k});
    EXPECT_TRUE(s.ok()) << s.status();
    ranks.push_back(*std::move(s));
    steps = std::max(steps, ranks.back().StepsPerEpoch());
  }
  std::vector<Entry> all;
  for (uint64_t step = 0; step < steps; ++step) {
    for (uint32_t r = 0; r < world; ++r) {
      if (step >= ranks[r].StepsPerEpoch()) continue;
      const StepEntries e = ranks[r].Step(epoch, step);
      EXPECT_EQ(e.ids.size(), e.reps.size());
      EXPECT_LE(e.ids.size(), batch);
      for (size_t i = 0; i < e.ids.size(); ++i) {
        all.push_back({e.ids[i], e.reps[i], r, step});
      }
    }
  }
  return all;
}

TEST(SamplerRaTest, EachIdAndRepOncePerEpochAcrossRanks) {
  for (uint32_t k : {2, 3, 4}) {
    for (uint32_t world : {1, 2, 3, 4, 8}) {
      for (uint32_t batch : {1, 2, 5}) {
        for (uint64_t n : {1, 7, 10, 23}) {
          const std::vector<Entry> got =
              WholeRaEpoch(n, batch, world, k, /*drop_last=*/false, 1);
          std::vector<uint32_t> seen(n * k, 0);
          for (const Entry& e : got) {
            ASSERT_LT(e.id, n);
            ASSERT_LT(e.rep, k);
            ++seen[e.id * k + e.rep];
          }
          EXPECT_EQ(got.size(), n * k);
          EXPECT_EQ(std::count(seen.begin(), seen.end(), 1u),
                    static_cast<ptrdiff_t>(n * k))
              << "n=" << n << " B=" << batch << " W=" << world << " k=" << k;
        }
      }
    }
  }
}

TEST(SamplerRaTest, CopiesOfASampleLandOnDistinctRanksWhenKAtMostW) {
  for (uint32_t world : {2, 3, 4, 8}) {
    for (uint32_t k = 2; k <= world; ++k) {
      for (uint32_t batch : {1, 2, 5}) {
        for (uint64_t n : {7, 10, 23}) {
          std::vector<std::vector<uint32_t>> ranks_of(n);
          for (const Entry& e : WholeRaEpoch(n, batch, world, k, false, 0)) {
            ranks_of[e.id].push_back(e.rank);
          }
          for (uint64_t id = 0; id < n; ++id) {
            std::vector<uint32_t> r = ranks_of[id];
            ASSERT_EQ(r.size(), k);
            std::sort(r.begin(), r.end());
            EXPECT_EQ(std::unique(r.begin(), r.end()), r.end())
                << "id " << id << " n=" << n << " B=" << batch
                << " W=" << world << " k=" << k;
          }
        }
      }
    }
  }
}

TEST(SamplerRaTest, RankTakesEveryWthEntryOfTheExpandedEpoch) {
  // Rank r's entries, in order, are E[r::W] with E[j] = (p[j/k], j%k):
  // RASampler's order before it pads and truncates.
  const uint64_t n = 23;
  const uint32_t k = 3, world = 4, batch = 5;
  const std::vector<uint64_t> p = EpochPermutation(n, 1, 2);
  for (uint32_t r = 0; r < world; ++r) {
    std::vector<std::pair<uint64_t, uint32_t>> want, got;
    for (uint64_t j = r; j < n * k; j += world) {
      want.emplace_back(p[j / k], static_cast<uint32_t>(j % k));
    }
    for (const Entry& e : WholeRaEpoch(n, batch, world, k, false, 2)) {
      if (e.rank == r) got.emplace_back(e.id, e.rep);
    }
    EXPECT_EQ(got, want) << "rank " << r;
  }
}

TEST(SamplerRaTest, WorkedExampleAndTheTail) {
  // N = 3, k = 2, B = 2, W = 2 (sampler.h): step 0 is full, the tail of 2
  // entries gives each rank one.
  const std::vector<uint64_t> p = EpochPermutation(3, 1, 0);
  Sampler r0 = *Sampler::Create({3, 1, 2, 0, 2, false, 2});
  Sampler r1 = *Sampler::Create({3, 1, 2, 1, 2, false, 2});
  EXPECT_THAT(r0.Step(0, 0).ids, ElementsAre(p[0], p[1]));
  EXPECT_THAT(r0.Step(0, 0).reps, ElementsAre(0, 0));
  EXPECT_THAT(r1.Step(0, 0).ids, ElementsAre(p[0], p[1]));
  EXPECT_THAT(r1.Step(0, 0).reps, ElementsAre(1, 1));
  EXPECT_THAT(r0.Step(0, 1).ids, ElementsAre(p[2]));
  EXPECT_THAT(r1.Step(0, 1).reps, ElementsAre(1));
  EXPECT_EQ(r0.StepsPerEpoch(), 2u);
  EXPECT_EQ(r1.SamplesPerEpoch(), 3u);
  // N = 5, k = 2, B = 4, W = 4: M = 10, F = 0, R = 10 strided over 4 ranks
  // as 3, 3, 2, 2 entries.
  std::vector<uint64_t> sizes;
  for (uint32_t r = 0; r < 4; ++r) {
    Sampler s = *Sampler::Create({5, 1, 4, r, 4, false, 2});
    sizes.push_back(s.SamplesPerEpoch());
    EXPECT_EQ(s.StepsPerEpoch(), 1u);
  }
  EXPECT_THAT(sizes, ElementsAre(3, 3, 2, 2));
  // N = 2, k = 2, W = 8: ranks 4..7 get no entry and no step.
  EXPECT_EQ(Sampler::Create({2, 1, 1, 3, 8, false, 2})->StepsPerEpoch(), 1u);
  EXPECT_EQ(Sampler::Create({2, 1, 1, 4, 8, false, 2})->StepsPerEpoch(), 0u);
}

TEST(SamplerRaTest, DropLastLeavesOutOnlyTheTailOfTheExpandedEpoch) {
  for (uint32_t k : {2, 4}) {
    for (uint32_t world : {1, 3, 4}) {
      for (uint32_t batch : {1, 2, 5}) {
        for (uint64_t n : {7, 23, 24}) {
          const uint64_t global = uint64_t{world} * batch;
          if (n * k < global) continue;
          const uint64_t kept = n * k / global * global;
          const std::vector<uint64_t> p = EpochPermutation(n, 1, 0);
          std::vector<std::pair<uint64_t, uint32_t>> want, got;
          for (uint64_t j = 0; j < kept; ++j) {
            want.emplace_back(p[j / k], static_cast<uint32_t>(j % k));
          }
          for (const Entry& e : WholeRaEpoch(n, batch, world, k, true, 0)) {
            got.emplace_back(e.id, e.rep);
          }
          std::sort(want.begin(), want.end());
          std::sort(got.begin(), got.end());
          EXPECT_EQ(got, want)
              << "n=" << n << " B=" << batch << " W=" << world << " k=" << k;
          for (uint32_t r = 0; r < world; ++r) {
            Sampler s = *Sampler::Create({n, 1, batch, r, world, true, k});
            EXPECT_EQ(s.StepsPerEpoch(), kept / global);
            EXPECT_EQ(s.SamplesPerEpoch(), kept / world);
          }
        }
      }
    }
  }
}

TEST(SamplerRaTest, OneRepIsTheBlockedRuleWithRepZero) {
  Sampler one = *Sampler::Create({23, 1, 5, 1, 3, false, 1});
  const std::vector<uint64_t> p = EpochPermutation(23, 1, 0);
  const StepEntries e = one.Step(0, 0);
  EXPECT_THAT(e.ids, ElementsAreArray(p.begin() + 5, p.begin() + 10));
  EXPECT_THAT(e.reps, ElementsAre(0, 0, 0, 0, 0));
}

}  // namespace
}  // namespace stoker::dataset
