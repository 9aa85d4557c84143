// Delivery: the transport-specific half of a stream served over gRPC. The
// reactor runs the protocol (open, flow control, acks, finish); a Delivery
// says where batch buffers come from and how a finished batch is described
// in its StreamResponse.
//
//   GrpcDelivery  heap buffers; the batch bytes travel in the message as a
//                 zero-copy payload slice (of the stream's buffer, or of a
//                 shared run's that lent it the batch).
//   ShmDelivery   slots of a memfd ring the client has mapped; the message
//                 carries the slot id, and an ack frees the slot. A batch
//                 lent by a shared run stays in the run's ring, which the
//                 client maps as a second ring, until the ack.
//
// Thread-safe.
#ifndef STOKER_SERVER_TRANSPORT_GRPC_DELIVERY_H_
#define STOKER_SERVER_TRANSPORT_GRPC_DELIVERY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/service/batch.h"
#include "server/service/stream_session.h"
#include "server/transport/grpc/buffer_pool.h"
#include "server/transport/grpc/convert.h"
#include "server/transport/shm/fd_server.h"
#include "server/transport/shm/shm_ring.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

class Delivery : public service::BufferSlots {
 public:
  // The wire bytes of the StreamResponse for `batch`; takes its buffer.
  virtual grpc::ByteBuffer Encode(service::ReadyBatch batch) = 0;
  // The client acknowledged the batch at (epoch, step).
  virtual void Acked(uint64_t epoch, uint64_t step) = 0;
  // BufferSlots::MayEnd: grpc only once every batch is acknowledged (the
  // client acks on receipt, so its last stall report is never lost). shm
  // once the client has fetched the ring, which ending would free; its
  // client may hold its last batches after the end (their slots stay
  // valid, since nothing refills them), so acks are not awaited.
  // Adds what the client needs to know to the stream header.
  virtual void DescribeIn(v1::StreamHeader* header) = 0;
  // `hook` runs when a buffer comes back other than through an ack, or when
  // MayEnd may have changed; cleared (and never run again) by
  // ClearReturnHook.
  virtual void SetReturnHook(std::function<void()> hook) = 0;
  virtual void ClearReturnHook() = 0;
};

class GrpcDelivery : public Delivery {
 public:
  explicit GrpcDelivery(std::shared_ptr<BufferPool> pool)
      : pool_(std::move(pool)) {}
  std::unique_ptr<service::BatchBuffer> Take() override {
    return pool_->Take();
  }
  grpc::ByteBuffer Encode(service::ReadyBatch batch) override;
  void Acked(uint64_t, uint64_t) override {}
  bool MayEnd(uint32_t unacked) const override { return unacked == 0; }
  void DescribeIn(v1::StreamHeader* header) override;
  void SetReturnHook(std::function<void()> hook) override {
    pool_->SetReturnHook(std::move(hook));
  }
  void ClearReturnHook() override { pool_->ClearReturnHook(); }

 private:
  const std::shared_ptr<BufferPool> pool_;
};

class ShmDelivery : public Delivery {
 public:
  // `fd_server` outlives every stream (the composition root stops the gRPC
  // server first). `shared_ring`, if not null, is the ring of the shared run
  // the stream joined, offered to a client that maps it; batches lent from
  // anywhere else are copied into the stream's own slot.
  ShmDelivery(std::shared_ptr<ShmRing> ring, FdServer* fd_server,
              std::shared_ptr<ShmRing> shared_ring = nullptr);
  ~ShmDelivery() override;
  std::unique_ptr<service::BatchBuffer> Take() override {
    return ring_->Take();
  }
  grpc::ByteBuffer Encode(service::ReadyBatch batch) override {
    return SerializeToByteBuffer(Describe(std::move(batch)));
  }
  // The StreamResponse announcing `batch`, for the call or the notice
  // socket; takes its buffer.
  v1::StreamResponse Describe(service::ReadyBatch batch);
  void Acked(uint64_t epoch, uint64_t step) override;
  bool MayEnd(uint32_t) const override { return ring_->handed_over(); }
  void DescribeIn(v1::StreamHeader* header) override;
  void SetReturnHook(std::function<void()> hook) override {
    ring_->SetHandOverHook(std::move(hook));
  }
  void ClearReturnHook() override { ring_->ClearHandOverHook(); }

 private:
  // A batch sent and not yet acknowledged.
  struct Sent {
    uint32_t slot = 0;  // Of the stream's ring.
    // A batch lent in place from the shared ring, kept from reuse.
    std::unique_ptr<service::BatchBuffer> lent;
  };

  const std::shared_ptr<ShmRing> ring_;
  FdServer* const fd_server_;
  const std::string token_;
  const std::shared_ptr<ShmRing> shared_ring_;
  const std::string shared_token_;

  absl::Mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Sent> sent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_GRPC_DELIVERY_H_
