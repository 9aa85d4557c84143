#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/service/batch.h"
#include "server/service/counters.h"
#include "server/transport/grpc/grpc_transport.h"
#include "server/transport/transport.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {
namespace {

// A batch of `n` zero bytes, which zstd makes much smaller.
struct Zeros {
  std::vector<uint8_t> data;
  service::ReadyBatch batch;
  explicit Zeros(size_t n) : data(n, 0) {
    batch.bytes = n;
    batch.decoded_bytes = n;
  }
};

TEST(ZstdEncoderTest, EncodesEveryBatchInPlaceAndCountsIt) {
  Zeros z(1 << 16);
  service::Counts counts;
  ZstdEncoder(/*adaptive=*/false).Encode(&z.batch, z.data.data(), false,
                                         &counts);
  EXPECT_EQ(z.batch.compression, service::Compression::kZstd);
  EXPECT_LT(z.batch.bytes, size_t{1} << 16);
  EXPECT_EQ(z.batch.decoded_bytes, size_t{1} << 16);
  EXPECT_EQ(counts.Read()[service::Count::kCompressedBatches], 1);
}

TEST(ZstdEncoderTest, AutoEncodesOnlyWhileSendingIsBehind) {
  service::Counts counts;
  ZstdEncoder automatic(/*adaptive=*/true);
  EXPECT_TRUE(automatic.adaptive());
  Zeros ahead(1 << 16);
  automatic.Encode(&ahead.batch, ahead.data.data(), /*behind=*/false, &counts);
  EXPECT_EQ(ahead.batch.compression, service::Compression::kNone);
  EXPECT_EQ(ahead.batch.bytes, size_t{1} << 16);
  Zeros behind(1 << 16);
  automatic.Encode(&behind.batch, behind.data.data(), /*behind=*/true,
                   &counts);
  EXPECT_EQ(behind.batch.compression, service::Compression::kZstd);
  EXPECT_EQ(counts.Read()[service::Count::kCompressedBatches], 1);
}

// The request's compression picks the delivery's encoder; the stream no
// longer hears of it.
TEST(ZstdEncoderTest, TheGrpcDeliveryEncodesAsTheRequestAsked) {
  GrpcTransport grpc;
  service::OpenedStream opened;
  opened.batch_bytes = 64;
  opened.window = 1;
  for (auto [asked, encodes, adaptive] :
       {std::tuple{v1::COMPRESSION_NONE, false, false},
        std::tuple{v1::COMPRESSION_ZSTD, true, false},
        std::tuple{v1::COMPRESSION_AUTO, true, true}}) {
    v1::OpenStream open;
    open.set_compression(asked);
    OpenContext context{open, opened, {}};
    auto delivery = grpc.Open(context);
    ASSERT_TRUE(delivery.ok()) << delivery.status();
    std::shared_ptr<const service::BatchEncoder> encoder =
        (*delivery)->encoder();
    ASSERT_EQ(encoder != nullptr, encodes) << asked;
    if (encoder != nullptr) {
      EXPECT_EQ(encoder->adaptive(), adaptive);
    }
  }
}

}  // namespace
}  // namespace stoker::transport
