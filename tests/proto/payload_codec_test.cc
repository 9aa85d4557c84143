// The zstd payload encoding (proto/payload_codec.h): what the daemon
// encodes in place, the client decodes to the same bytes; damage is
// DataLoss, never a crash or wrong bytes.
#include "proto/payload_codec.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::codec {
namespace {

using ::testing::HasSubstr;

// `size` bytes: runs of one value (compressible) where `compressible`,
// else uniform noise; mixed per block when `mixed`.
std::vector<uint8_t> Data(size_t size, bool compressible, bool mixed = false) {
  std::vector<uint8_t> out(size);
  std::mt19937 gen(7);
  for (size_t i = 0; i < size; ++i) {
    const bool smooth =
        mixed ? (i / kBlockBytes) % 2 == 1 : compressible;
    out[i] = smooth ? static_cast<uint8_t>((i / 512) % 7)
                    : static_cast<uint8_t>(gen());
  }
  return out;
}

std::vector<uint8_t> RoundTrip(const std::vector<uint8_t>& data,
                               size_t* encoded_size) {
  std::vector<uint8_t> buffer = data;
  *encoded_size = CompressInPlace(buffer.data(), buffer.size());
  if (*encoded_size == 0) return buffer;
  EXPECT_LT(*encoded_size, data.size());
  std::vector<uint8_t> out(data.size());
  EXPECT_TRUE(
      Decompress(buffer.data(), *encoded_size, out.data(), out.size()).ok());
  return out;
}

TEST(PayloadCodecTest, CompressibleDataShrinksAndDecodesToTheSameBytes) {
  for (size_t size : {size_t{1000}, kBlockBytes, kBlockBytes + 1,
                      3 * kBlockBytes + 12345}) {
    const std::vector<uint8_t> data = Data(size, true);
    size_t encoded = 0;
    EXPECT_EQ(RoundTrip(data, &encoded), data) << size;
    EXPECT_GT(encoded, 0u) << size;
    EXPECT_LT(encoded, size / 10) << size;
  }
}

TEST(PayloadCodecTest, NoiseIsLeftAsItWas) {
  const std::vector<uint8_t> data = Data(2 * kBlockBytes + 7, false);
  std::vector<uint8_t> buffer = data;
  EXPECT_EQ(CompressInPlace(buffer.data(), buffer.size()), 0u);
  EXPECT_EQ(buffer, data);
}

TEST(PayloadCodecTest, StoredAndCompressedBlocksMixInPlace) {
  // Noise first, so the first block is stored where it lies and the
  // compressed ones move back over read data only.
  const std::vector<uint8_t> data = Data(5 * kBlockBytes + 99, false, true);
  size_t encoded = 0;
  EXPECT_EQ(RoundTrip(data, &encoded), data);
  EXPECT_GT(encoded, 0u);
  EXPECT_GT(encoded, 3 * kBlockBytes);  // The noise blocks stayed raw.
}

TEST(PayloadCodecTest, DamageIsDataLossNamingTheSizes) {
  const std::vector<uint8_t> data = Data(2 * kBlockBytes, true);
  std::vector<uint8_t> buffer = data;
  const size_t encoded = CompressInPlace(buffer.data(), buffer.size());
  ASSERT_GT(encoded, 0u);
  std::vector<uint8_t> out(data.size());
  // Wrong decoded size, truncation, and a block's frame broken.
  absl::Status wrong_size =
      Decompress(buffer.data(), encoded, out.data(), out.size() + 1);
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(wrong_size.message(), HasSubstr("is damaged"));
  EXPECT_EQ(Decompress(buffer.data(), encoded - 3, out.data(), out.size())
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(Decompress(buffer.data(), 5, out.data(), out.size()).code(),
            absl::StatusCode::kDataLoss);
  std::vector<uint8_t> flipped(buffer.begin(), buffer.begin() + encoded);
  for (size_t i = 0; i < 4; ++i) flipped[i] ^= 0x5a;  // zstd's magic.
  EXPECT_EQ(
      Decompress(flipped.data(), flipped.size(), out.data(), out.size()).code(),
      absl::StatusCode::kDataLoss);
}

TEST(PayloadCodecTest, EmptyDataIsNotEncoded) {
  uint8_t byte = 0;
  EXPECT_EQ(CompressInPlace(&byte, 0), 0u);
}

}  // namespace
}  // namespace stoker::codec
