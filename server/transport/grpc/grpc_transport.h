// The grpc transport: batch bytes travel in the StreamResponse on the call,
// as a zero-copy payload (of the stream's heap buffer, or of the shared
// run's buffer that lent it the batch), compressed where the request asked
// (ZstdEncoder, which the stream runs in place on the worker that finished
// the batch; a shared run's lent batches go as they are). Works for any
// client, local or remote.
#ifndef STOKER_SERVER_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
#define STOKER_SERVER_TRANSPORT_GRPC_GRPC_TRANSPORT_H_

#include <functional>
#include <memory>

#include "server/transport/grpc/buffer_pool.h"
#include "server/transport/transport.h"

namespace stoker::transport {

// The wire encoding a request asked for (OpenStream.compression): zstd,
// level 1, in place, of every batch (ZSTD) or only while sending has
// fallen behind building (AUTO). Counted into the stream's counts.
class ZstdEncoder : public service::BatchEncoder {
 public:
  explicit ZstdEncoder(bool adaptive) : adaptive_(adaptive) {}
  bool adaptive() const override { return adaptive_; }
  void Encode(service::ReadyBatch* batch, uint8_t* data, bool behind,
              service::Counts* counts) const override;

 private:
  const bool adaptive_;
};

class GrpcDelivery : public Delivery {
 public:
  // `encoder`: null for a request that asked for no compression.
  GrpcDelivery(std::shared_ptr<BufferPool> pool,
               std::shared_ptr<const service::BatchEncoder> encoder)
      : pool_(std::move(pool)), encoder_(std::move(encoder)) {}
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
  std::shared_ptr<const service::BatchEncoder> encoder() const override {
    return encoder_;
  }

 private:
  const std::shared_ptr<BufferPool> pool_;
  const std::shared_ptr<const service::BatchEncoder> encoder_;
};

class GrpcTransport : public Transport {
 public:
  absl::Status Available() const override { return absl::OkStatus(); }
  bool client_holds() const override { return false; }
  absl::StatusOr<std::shared_ptr<Delivery>> Open(
      const OpenContext& context) override;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
