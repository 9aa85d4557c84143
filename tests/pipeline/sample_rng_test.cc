#include "server/pipeline/sample_rng.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::pipeline {
namespace {

TEST(SampleRngTest, MatchesGoldenValues) {
  // Computed by an independent Python model of the seeding and of
  // xoshiro256**; a change here changes every augmentation ever made.
  SampleRng rng(1, 2, 3);
  EXPECT_EQ(rng.Next(), 0x294537e67c72984aULL);
  EXPECT_EQ(rng.Next(), 0x6e573f79d7c22da3ULL);
  EXPECT_EQ(rng.Next(), 0x6ce3189fe3d40db7ULL);
  SampleRng zero(0, 0, 0);
  EXPECT_EQ(zero.Next(), 0x26417a3c4e93c66eULL);
  EXPECT_EQ(zero.Next(), 0xb2a16e37040c91d9ULL);
}

TEST(SampleRngTest, SameKeyGivesSameStream) {
  SampleRng a(42, 7, 123456789), b(42, 7, 123456789);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.Next(), b.Next());
}

TEST(SampleRngTest, EachKeyPartChangesTheStream) {
  std::set<uint64_t> firsts;
  for (uint64_t seed : {0, 1}) {
    for (uint64_t epoch : {0, 1}) {
      for (uint64_t sample : {0, 1}) {
        firsts.insert(SampleRng(seed, epoch, sample).Next());
      }
    }
  }
  EXPECT_EQ(firsts.size(), 8u);
  // Swapping epoch and sample id must not give the same stream.
  EXPECT_NE(SampleRng(5, 1, 2).Next(), SampleRng(5, 2, 1).Next());
}

TEST(SampleRngTest, RepZeroIsTheOldStreamAndEachRepItsOwn) {
  // rep 0 must leave every stream without repeated augmentation unchanged:
  // these are the first draws of SampleRng(1, 2, 3) before the rep existed
  // (sample_rng.cc at 8d5ab30).
  SampleRng rep0(1, 2, 3, 0);
  for (uint64_t before : {0x294537e67c72984aull, 0x6e573f79d7c22da3ull,
                          0x6ce3189fe3d40db7ull, 0x0277a39a0b89499bull}) {
    ASSERT_EQ(rep0.Next(), before);
  }
  std::set<uint64_t> firsts;
  for (uint32_t rep = 0; rep < 64; ++rep) {
    firsts.insert(SampleRng(1, 2, 3, rep).Next());
  }
  EXPECT_EQ(firsts.size(), 64u);
  // A rep must not alias a neighbouring sample id.
  EXPECT_NE(SampleRng(1, 2, 3, 1).Next(), SampleRng(1, 2, 4).Next());
}

TEST(SampleRngTest, ViewInstancesAreStreamsOfTheirOwnAndKeepTheRep) {
  SampleRng sample(1, 2, 3, 2);
  SampleRng instance0(sample, 0);
  SampleRng same(1, 2, 3, 2);
  // Instance 0 is the sample's own stream, however far `sample` has drawn.
  sample.Next();
  for (int i = 0; i < 4; ++i) ASSERT_EQ(instance0.Next(), same.Next());
  std::set<uint64_t> firsts;
  for (uint32_t rep : {0u, 1u, 2u}) {
    SampleRng of_rep(1, 2, 3, rep);
    for (uint32_t instance = 0; instance < 16; ++instance) {
      firsts.insert(SampleRng(of_rep, instance).Next());
    }
  }
  EXPECT_EQ(firsts.size(), 48u);
  // An instance does not alias another rep or sample.
  SampleRng rep0(1, 2, 3);
  EXPECT_NE(SampleRng(rep0, 1).Next(), SampleRng(1, 2, 3, 1).Next());
  EXPECT_NE(SampleRng(rep0, 1).Next(), SampleRng(1, 2, 4).Next());
}

TEST(SampleRngTest, UniformStaysInRangeWithTheRightMean) {
  SampleRng rng(9, 0, 0);
  double sum = 0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const double v = rng.Uniform(-2.0, 6.0);
    ASSERT_GE(v, -2.0);
    ASSERT_LT(v, 6.0);
    sum += v;
  }
  // Standard error of the mean is 8 / sqrt(12 * 20000) ~= 0.016.
  EXPECT_NEAR(sum / kDraws, 2.0, 0.08);
}

TEST(SampleRngTest, UniformIntCoversItsInclusiveRangeEvenly) {
  SampleRng rng(3, 1, 4);
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 8000; ++i) {
    const int64_t v = rng.UniformInt(10, 13);
    ASSERT_GE(v, 10);
    ASSERT_LE(v, 13);
    ++counts[v - 10];
  }
  for (int count : counts) EXPECT_NEAR(count, 2000, 200);
}

TEST(SampleRngTest, UniformIntHandlesDegenerateAndFullRanges) {
  SampleRng rng(1, 1, 1);
  EXPECT_EQ(rng.UniformInt(5, 5), 5);
  EXPECT_EQ(rng.UniformInt(-3, -3), -3);
  const int64_t v = rng.UniformInt(INT64_MIN, INT64_MAX);
  EXPECT_GE(v, INT64_MIN);
  const int64_t negative = rng.UniformInt(-5, -1);
  EXPECT_GE(negative, -5);
  EXPECT_LE(negative, -1);
}

TEST(SampleRngTest, BernoulliFollowsItsProbability) {
  SampleRng rng(2, 2, 2);
  int hits = 0;
  for (int i = 0; i < 10000; ++i) hits += rng.Bernoulli(0.25) ? 1 : 0;
  EXPECT_NEAR(hits, 2500, 200);
  for (int i = 0; i < 100; ++i) {
    ASSERT_FALSE(rng.Bernoulli(0.0));
    ASSERT_TRUE(rng.Bernoulli(1.0));
  }
}

TEST(SampleRngTest, CertainBernoulliDrawsNothing) {
  SampleRng a(8, 8, 8), b(8, 8, 8);
  a.Bernoulli(0.0);
  a.Bernoulli(1.0);
  EXPECT_EQ(a.Next(), b.Next());
}

TEST(SampleRngTest, BatchGeneratorIsItsKeysAndNoSamples) {
  SampleRng a = SampleRng::ForBatch(4, 1, 9, 2);
  SampleRng b = SampleRng::ForBatch(4, 1, 9, 2);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(a.Next(), b.Next());
  // Each key part matters, and a batch's stream is not the sample's of
  // the same numbers (step 9 against sample 9).
  std::set<uint64_t> firsts;
  for (uint64_t seed : {0, 1}) {
    for (uint64_t epoch : {0, 1}) {
      for (uint64_t step : {0, 1}) {
        for (uint32_t rank : {0u, 1u}) {
          firsts.insert(SampleRng::ForBatch(seed, epoch, step, rank).Next());
        }
      }
    }
  }
  EXPECT_EQ(firsts.size(), 16u);
  EXPECT_NE(SampleRng::ForBatch(4, 1, 9, 0).Next(), SampleRng(4, 1, 9).Next());
}

// Mean and variance of `n` draws of `draw` against the distribution's, to
// within 5 standard errors (the variance's from the fourth central moment
// of the draws).
template <typename Draw>
void ExpectMoments(Draw draw, double mean, double variance, int n,
                   const std::string& what) {
  std::vector<double> x(n);
  double sum = 0;
  for (double& v : x) {
    v = draw();
    sum += v;
  }
  const double m = sum / n;
  double m2 = 0, m4 = 0;
  for (double v : x) {
    const double d = v - m;
    m2 += d * d;
    m4 += d * d * d * d;
  }
  m2 /= n;
  m4 /= n;
  EXPECT_NEAR(m, mean, 5 * std::sqrt(variance / n)) << what;
  EXPECT_NEAR(m2, variance, 5 * std::sqrt((m4 - m2 * m2) / n)) << what;
}

TEST(SampleRngTest, BetaDrawsHaveTheMeanAndVarianceOfBeta) {
  SampleRng rng(7, 0, 0);
  for (const auto& [a, b] :
       std::vector<std::pair<double, double>>{{0.2, 0.2},
                                              {1.0, 1.0},
                                              {0.8, 0.8},
                                              {2.0, 5.0},
                                              {0.05, 0.05},
                                              {30.0, 30.0}}) {
    const double mean = a / (a + b);
    const double variance = a * b / ((a + b) * (a + b) * (a + b + 1));
    ExpectMoments([&] { return rng.Beta(a, b); }, mean, variance, 200000,
                  "Beta(" + std::to_string(a) + ", " + std::to_string(b) + ")");
  }
}

TEST(SampleRngTest, BetaOfTinyAlphaStaysInTheUnitInterval) {
  // Both Gamma draws underflow a double here; the ratio must not be NaN.
  SampleRng rng(7, 0, 1);
  int ones = 0;
  for (int i = 0; i < 20000; ++i) {
    const double v = rng.Beta(0.002, 0.002);
    ASSERT_GE(v, 0.0);
    ASSERT_LE(v, 1.0);
    ones += v > 0.5 ? 1 : 0;
  }
  EXPECT_NEAR(ones, 10000, 500);  // Symmetric: half near 1.
}

TEST(SampleRngTest, GammaAndNormalDrawsHaveTheirMoments) {
  SampleRng rng(7, 1, 0);
  for (double alpha : {0.3, 1.0, 4.5}) {
    ExpectMoments([&] { return rng.Gamma(alpha); }, alpha, alpha, 200000,
                  "Gamma(" + std::to_string(alpha) + ")");
  }
  ExpectMoments([&] { return rng.Normal(); }, 0.0, 1.0, 200000, "Normal");
}

}  // namespace
}  // namespace stoker::pipeline
