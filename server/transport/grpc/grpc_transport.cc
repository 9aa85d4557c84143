#include "server/transport/grpc/grpc_transport.h"

#include <utility>

#include "server/transport/wire.h"

namespace stoker::transport {

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
  return std::make_shared<GrpcDelivery>(std::make_shared<BufferPool>(
      context.opened.batch_bytes, context.opened.window,
      context.opened.ticket));
}

namespace {
std::unique_ptr<Transport> MakeGrpcTransport(const TransportEnv&) {
  return std::make_unique<GrpcTransport>();
}
}  // namespace

STOKER_REGISTER_TRANSPORT(v1::TRANSPORT_GRPC, "grpc", MakeGrpcTransport);

}  // namespace stoker::transport
