// Tests of kernels/warp: torchvision's inverse matrix and sampling on
// cases whose answer is known exactly. tests/python/test_op_parity.py holds
// the warps against F.affine and F.rotate pixel by pixel.

#include "server/pipeline/kernels/warp.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::pipeline::kernels {
namespace {

// A w x h RGB image whose every byte differs from its neighbours'.
std::vector<uint8_t> Pattern(int w, int h) {
  std::vector<uint8_t> data(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<uint8_t>((i * 37 + i / 7) % 251);
  }
  return data;
}

ImageBuffer View(std::vector<uint8_t>& data, int w, int h) {
  return ImageBuffer{data.data(), static_cast<size_t>(w) * 3, w, h, 3};
}

uint8_t At(const std::vector<uint8_t>& data, int w, int x, int y, int c) {
  return data[(static_cast<size_t>(y) * w + x) * 3 + c];
}

TEST(InverseAffineMatrixTest, MatchesTorchvisionsFormula) {
  // _get_inverse_affine_matrix([0, 0], 30, [0, 0], 1, [0, 0]), printed by
  // torchvision 0.14.
  const auto m = InverseAffineMatrix(0, 0, 30, 0, 0, 1, 0, 0);
  EXPECT_NEAR(m[0], 0.8660254037844387, 1e-15);
  EXPECT_NEAR(m[1], 0.49999999999999994, 1e-15);
  EXPECT_NEAR(m[3], -0.49999999999999994, 1e-15);
  EXPECT_NEAR(m[4], 0.8660254037844387, 1e-15);
  EXPECT_EQ(m[2], 0.0);
  // A translation moves the origin back: input = output - t.
  const auto t = InverseAffineMatrix(0, 0, 0, 3, -2, 1, 0, 0);
  EXPECT_DOUBLE_EQ(t[2], -3);
  EXPECT_DOUBLE_EQ(t[5], 2);
  // Scale 2 halves the inverse.
  const auto s = InverseAffineMatrix(0, 0, 0, 0, 0, 2, 0, 0);
  EXPECT_DOUBLE_EQ(s[0], 0.5);
  EXPECT_DOUBLE_EQ(s[4], 0.5);
}

TEST(WarpTest, RotateByNinetyDegreesIsRot90OnASquare) {
  constexpr int kN = 10;
  const std::vector<uint8_t> source = Pattern(kN, kN);
  for (WarpInterpolation interpolation :
       {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
    std::vector<uint8_t> image = source;
    Rotate(View(image, kN, kN), 90, interpolation, std::nullopt);
    // Counter-clockwise: out[y][x] = in[x][N - 1 - y], as np.rot90.
    for (int y = 0; y < kN; ++y) {
      for (int x = 0; x < kN; ++x) {
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(At(image, kN, x, y, c), At(source, kN, kN - 1 - y, x, c))
              << x << "," << y << " bilinear "
              << (interpolation == WarpInterpolation::kBilinear);
        }
      }
    }
  }
}

TEST(WarpTest, TranslateShiftsAndFillsWhatCameFromOutside) {
  constexpr int kW = 9, kH = 7;
  const std::vector<uint8_t> source = Pattern(kW, kH);
  std::vector<uint8_t> image = source;
  const WarpFill fill = std::array<float, 3>{10, 20, 30.5f};
  Affine(View(image, kW, kH), 0, 3, -2, 1, 0, 0, WarpInterpolation::kNearest,
         fill);
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      const int sx = x - 3, sy = y + 2;
      const bool inside = sx >= 0 && sy < kH;
      for (int c = 0; c < 3; ++c) {
        // 30.5 rounds half to even, to 30.
        const uint8_t want =
            inside ? At(source, kW, sx, sy, c)
                   : static_cast<uint8_t>(c == 2 ? 30 : 10 * (c + 1));
        ASSERT_EQ(At(image, kW, x, y, c), want) << x << "," << y << "," << c;
      }
    }
  }
}

TEST(WarpTest, BilinearFillBlendsTheWarpedMaskAsTorchvisionDoes) {
  // Half a pixel to the right: column 0 takes half its weight from outside.
  constexpr int kW = 4, kH = 3;
  const std::vector<uint8_t> gray(kW * kH * 3, 200);
  std::vector<uint8_t> no_fill = gray, with_fill = gray;
  Affine(View(no_fill, kW, kH), 0, 0.5, 0, 1, 0, 0,
         WarpInterpolation::kBilinear, std::nullopt);
  Affine(View(with_fill, kW, kH), 0, 0.5, 0, 1, 0, 0,
         WarpInterpolation::kBilinear, std::array<float, 3>{200, 200, 200});
  for (int y = 0; y < kH; ++y) {
    // Without a fill the outside weighs in as 0: 0.5 * 200.
    EXPECT_EQ(At(no_fill, kW, 0, y, 0), 100);
    // With one, torchvision blends the already masked value once more:
    // 100 * 0.5 + (1 - 0.5) * 200 = 150, not 200.
    EXPECT_EQ(At(with_fill, kW, 0, y, 1), 150);
    for (int x = 1; x < kW; ++x) {
      EXPECT_EQ(At(no_fill, kW, x, y, 2), 200);
      EXPECT_EQ(At(with_fill, kW, x, y, 2), 200);
    }
  }
}

}  // namespace
}  // namespace stoker::pipeline::kernels
