#include "server/tensor/float16.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace stoker::tensor {
namespace {

TEST(FloatToHalfTest, EncodesExactValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);               // Largest half.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // Smallest normal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -24)), 0x0003);
}

TEST(FloatToHalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is half way between 1 and 1 + 2^-10: ties go to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 is half way between mantissas 1 and 2: goes to 2.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above half way rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)),
            0x3C01);
  // A mantissa carry moves to the next binade: 2047/1024 -> 2.
  EXPECT_EQ(FloatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000);
  // Subnormal ties: 2^-25 is half of the smallest subnormal -> 0;
  // 3 * 2^-25 is 1.5 subnormals -> 2 (even).
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
}

TEST(FloatToHalfTest, OverflowsToInfinityAndKeepsNan) {
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // Rounds past the largest.
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(HalfToFloatTest, InvertsFloatToHalfOnEveryHalf) {
  // Every finite half, normal and subnormal, round-trips; NaNs stay NaN.
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = HalfToFloat(h);
    if ((h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << bits;
  }
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace stoker::tensor
