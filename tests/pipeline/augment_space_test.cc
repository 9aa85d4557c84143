// Tests of augment_space's draws: each policy's choices against the
// uniform definitions of torchvision's autoaugment.py (and timm's
// magnitude noise). The tables and _apply_op are held against torchvision
// itself by tests/python/test_augment_space.py.

#include "server/pipeline/augment_space.h"

#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::pipeline {
namespace {

// The 0.999 quantile of chi-squared with `df` degrees of freedom
// (Wilson-Hilferty; within 0.5% for df >= 10).
double ChiSquaredQuantile999(int df) {
  const double z = 3.090232306;  // The standard normal's 0.999 quantile.
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Chi-squared of `counts` against `expected` (same keys).
template <typename Key>
double ChiSquared(const std::map<Key, int>& counts,
                  const std::map<Key, double>& expected) {
  double chi2 = 0;
  for (const auto& [key, e] : expected) {
    const auto it = counts.find(key);
    const double c = it == counts.end() ? 0 : it->second;
    chi2 += (c - e) * (c - e) / e;
  }
  return chi2;
}

TEST(ChiSquaredQuantileTest, MatchesTables) {
  EXPECT_NEAR(ChiSquaredQuantile999(23), 49.73, 0.2);
  EXPECT_NEAR(ChiSquaredQuantile999(100), 149.45, 0.3);
}

TEST(TrivialAugmentTest, OpBinAndSignFollowTheUniformDefinition) {
  // TrivialAugmentWide: op uniform over 14; a bin uniform over 31 for the
  // 11 ops with magnitudes; a fair sign for the 9 signed ones.
  constexpr int kBins = 31, kSamples = 10000;
  using Cell = std::tuple<int, int, bool>;  // op, bin (-1), negative
  std::map<Cell, int> counts;
  for (uint64_t id = 0; id < kSamples; ++id) {
    SampleRng rng(11, 0, id);
    const AugmentChoice c = DrawTrivialAugment(kBins, rng);
    ++counts[{static_cast<int>(c.op), c.bin, c.negative}];
    if (c.bin >= 0) {
      ASSERT_EQ(c.level, c.bin);
    }
  }
  std::map<Cell, double> expected;
  const auto ops = SpaceOps(AugmentSpace::kTrivialAugmentWide);
  for (const AugmentOpInfo& info : ops) {
    const int op = static_cast<int>(info.op);
    const double p_op = 1.0 / ops.size();
    if (!info.has_magnitudes) {
      expected[{op, -1, false}] = kSamples * p_op;
      continue;
    }
    for (int b = 0; b < kBins; ++b) {
      for (bool negative : {false, true}) {
        if (negative && !info.is_signed) continue;
        expected[{op, b, negative}] =
            kSamples * p_op / kBins / (info.is_signed ? 2 : 1);
      }
    }
  }
  // No draw falls outside the definition's cells.
  for (const auto& [cell, n] : counts) {
    ASSERT_TRUE(expected.count(cell))
        << "op " << std::get<0>(cell) << " bin " << std::get<1>(cell);
  }
  ASSERT_EQ(expected.size(), 3u + 2 * 31 + 9 * 62);
  EXPECT_LT(ChiSquared(counts, expected),
            ChiSquaredQuantile999(static_cast<int>(expected.size()) - 1));
}

TEST(RandAugmentTest, OpAndSignFollowTheUniformDefinition) {
  constexpr int kSamples = 10000;
  std::map<std::pair<int, bool>, int> counts;
  for (uint64_t id = 0; id < kSamples; ++id) {
    SampleRng rng(12, 0, id);
    const AugmentChoice c = DrawRandAugment(9, 31, 0.0, rng);
    ++counts[{static_cast<int>(c.op), c.negative}];
    for (const AugmentOpInfo& info : SpaceOps(AugmentSpace::kRandAugment)) {
      // The fixed magnitude, without noise.
      if (info.op == c.op) {
        ASSERT_EQ(c.bin, info.has_magnitudes ? 9 : -1);
      }
    }
    if (c.bin >= 0) {
      ASSERT_EQ(c.level, 9.0);
    }
  }
  std::map<std::pair<int, bool>, double> expected;
  for (const AugmentOpInfo& info : SpaceOps(AugmentSpace::kRandAugment)) {
    const int op = static_cast<int>(info.op);
    if (info.is_signed) {
      expected[{op, false}] = expected[{op, true}] = kSamples / 14.0 / 2;
    } else {
      expected[{op, false}] = kSamples / 14.0;
    }
  }
  ASSERT_EQ(counts.size(), expected.size());
  EXPECT_LT(ChiSquared(counts, expected),
            ChiSquaredQuantile999(static_cast<int>(expected.size()) - 1));
}

TEST(RandAugmentTest, MagnitudeNoiseIsTimmsNormalClampedToTheBins) {
  // mstd 0.5 about level 5 of 11 bins (timm's 0-10 scale): mean 5, std 0.5.
  double sum = 0, squares = 0;
  int with_level = 0;
  for (uint64_t id = 0; id < 20000; ++id) {
    SampleRng rng(13, 0, id);
    const AugmentChoice c = DrawRandAugment(5, 11, 0.5, rng);
    if (c.bin < 0) continue;
    ++with_level;
    sum += c.level;
    squares += c.level * c.level;
  }
  const double mean = sum / with_level;
  EXPECT_NEAR(mean, 5.0, 0.02);
  EXPECT_NEAR(std::sqrt(squares / with_level - mean * mean), 0.5, 0.02);
  // Near the top the draws are clamped to the last bin; mstd > 100 draws
  // uniformly in [0, magnitude].
  double top = 0, uniform_sum = 0;
  int uniform_n = 0;
  for (uint64_t id = 0; id < 4000; ++id) {
    SampleRng rng(14, 0, id), rng2(15, 0, id);
    const AugmentChoice c = DrawRandAugment(10, 11, 3.0, rng);
    if (c.bin >= 0) {
      ASSERT_LE(c.level, 10.0);
      ASSERT_GE(c.level, 0.0);
      top = std::max(top, c.level);
    }
    const AugmentChoice u = DrawRandAugment(8, 11, 1000.0, rng2);
    if (u.bin >= 0) {
      ASSERT_LE(u.level, 8.0);
      uniform_sum += u.level;
      ++uniform_n;
    }
  }
  EXPECT_EQ(top, 10.0);
  EXPECT_NEAR(uniform_sum / uniform_n, 4.0, 0.15);
}

TEST(AutoAugmentTest, SubPolicyProbabilitiesAndSignsFollowTheDefinition) {
  constexpr int kSamples = 10000;
  const auto policies = ImageNetPolicy();
  ASSERT_EQ(policies.size(), 25u);
  std::map<int, int> counts;
  std::vector<std::array<int, 2>> applied(25), negative(25);
  for (uint64_t id = 0; id < kSamples; ++id) {
    SampleRng rng(16, 0, id);
    const AutoAugmentChoice c = DrawAutoAugment(rng);
    ++counts[c.policy];
    for (int i = 0; i < 2; ++i) {
      applied[c.policy][i] += c.applies[i];
      negative[c.policy][i] += c.negative[i];
    }
  }
  std::map<int, double> expected;
  for (int k = 0; k < 25; ++k) expected[k] = kSamples / 25.0;
  EXPECT_LT(ChiSquared(counts, expected), ChiSquaredQuantile999(24));
  for (int k = 0; k < 25; ++k) {
    for (int i = 0; i < 2; ++i) {
      const PolicyStep& step = policies[k][i];
      const double n = counts[k];
      // Binomial: within 4 standard deviations.
      const double sd = std::sqrt(n * step.p * (1 - step.p)) + 1e-9;
      EXPECT_NEAR(applied[k][i], n * step.p, 4 * sd + 0.5) << k << "," << i;
      const bool is_signed =
          step.op == AugmentOp::kRotate || step.op == AugmentOp::kColor ||
          step.op == AugmentOp::kContrast || step.op == AugmentOp::kSharpness ||
          step.op == AugmentOp::kShearX;
      if (is_signed) {
        EXPECT_NEAR(negative[k][i], n / 2, 4 * std::sqrt(n / 4)) << k;
      } else {
        EXPECT_EQ(negative[k][i], 0) << k;
      }
    }
  }
}

TEST(MagnitudeTest, FractionalLevelsLieBetweenTheBins) {
  const double lo = Magnitude(AugmentSpace::kRandAugment, AugmentOp::kRotate, 9,
                              31, 224, 224);
  const double mid = Magnitude(AugmentSpace::kRandAugment, AugmentOp::kRotate,
                               9.5, 31, 224, 224);
  const double hi = Magnitude(AugmentSpace::kRandAugment, AugmentOp::kRotate,
                              10, 31, 224, 224);
  EXPECT_FLOAT_EQ(lo, 9.0);
  EXPECT_FLOAT_EQ(mid, 9.5);
  EXPECT_FLOAT_EQ(hi, 10.0);
  // Posterize keeps whole bits at any level.
  EXPECT_EQ(Magnitude(AugmentSpace::kRandAugment, AugmentOp::kPosterize, 9.4,
                      31, 224, 224),
            7);
}

}  // namespace
}  // namespace stoker::pipeline
