// The grpc transport: batch bytes travel in the StreamResponse on the call,
// as a zero-copy payload (of the stream's heap buffer, or of the shared
// run's buffer that lent it the batch), compressed where the request asked
// (the stream encodes it in place: service::Compression). Works for any
// client, local or remote.
#ifndef STOKER_SERVER_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
#define STOKER_SERVER_TRANSPORT_GRPC_GRPC_TRANSPORT_H_

#include <functional>
#include <memory>

#include "server/transport/grpc/buffer_pool.h"
#include "server/transport/transport.h"

namespace stoker::transport {

class GrpcDelivery : public Delivery {
 public:
  explicit GrpcDelivery(std::shared_ptr<BufferPool> pool)
      : pool_(std::move(pool)) {}
  std::unique_ptr<service::BatchBuffer> Take() override {
    return pool_->Take();
  }
  Handover HandOver(service::ReadyBatch batch) override;
  void Acked(uint64_t, uint64_t) override {}
  // Only once every batch is acknowledged: the client acks on receipt, so
  // its last stall report is never lost.
  bool MayEnd(uint32_t in_flight) const override { return in_flight == 0; }
  void DescribeIn(v1::StreamHeader* header) override;
  void SetReturnHook(std::function<void()> hook) override {
    pool_->SetReturnHook(std::move(hook));
  }
  void ClearReturnHook() override { pool_->ClearReturnHook(); }

 private:
  const std::shared_ptr<BufferPool> pool_;
};

class GrpcTransport : public Transport {
 public:
  absl::Status Available() const override { return absl::OkStatus(); }
  bool client_holds() const override { return false; }
  bool sends_payload() const override { return true; }
  absl::StatusOr<std::shared_ptr<Delivery>> Open(
      const OpenContext& context) override;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
