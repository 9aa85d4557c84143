#include "server/transport/grpc/grpc_transport.h"

#include <utility>

#include "proto/payload_codec.h"
#include "server/base/clock.h"
#include "server/transport/wire.h"

namespace stoker::transport {

void ZstdEncoder::Encode(service::ReadyBatch* batch, uint8_t* data,
                         bool behind, service::Counts* counts) const {
  if (adaptive_ && !behind) return;
  const int64_t start = NowNs();
  const size_t encoded = codec::CompressInPlace(data, batch->bytes);
  counts->Add(service::Count::kCompressNs, NowNs() - start);
  if (encoded == 0) return;  // It would not get smaller.
  batch->compression = service::Compression::kZstd;
  batch->bytes = encoded;
  counts->Add(service::Count::kCompressedBatches, 1);
}

Handover GrpcDelivery::HandOver(service::ReadyBatch batch) {
  Handover handover;
  FillBatchMetadata(batch, handover.message.mutable_batch());
  handover.payload_bytes = batch.bytes;
  handover.payload = pool_->Lend(std::move(batch.buffer));
  return handover;
}

void GrpcDelivery::DescribeIn(v1::StreamHeader* header) {
  header->set_transport(v1::TRANSPORT_GRPC);
}

absl::StatusOr<std::shared_ptr<Delivery>> GrpcTransport::Open(
    const OpenContext& context) {
  std::shared_ptr<const service::BatchEncoder> encoder;
  switch (context.open.compression()) {
    case v1::COMPRESSION_ZSTD:
      encoder = std::make_shared<ZstdEncoder>(/*adaptive=*/false);
      break;
    case v1::COMPRESSION_AUTO:
      encoder = std::make_shared<ZstdEncoder>(/*adaptive=*/true);
      break;
    default:  // NONE, or a value newer than this daemon.
      break;
  }
  return std::make_shared<GrpcDelivery>(
      std::make_shared<BufferPool>(context.opened.batch_bytes,
                                   context.opened.window,
                                   context.opened.ticket),
      std::move(encoder));
}

namespace {
std::unique_ptr<Transport> MakeGrpcTransport(const TransportEnv&) {
  return std::make_unique<GrpcTransport>();
}
}  // namespace

STOKER_REGISTER_TRANSPORT(v1::TRANSPORT_GRPC, "grpc", MakeGrpcTransport);

}  // namespace stoker::transport
