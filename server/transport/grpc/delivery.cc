#include "server/transport/grpc/delivery.h"

#include <cstring>

#include "server/transport/grpc/convert.h"

namespace stoker::transport {

grpc::ByteBuffer GrpcDelivery::Encode(service::ReadyBatch batch) {
  grpc::Slice slices[2] = {
      grpc::Slice(BatchWirePrefix(batch)),
      pool_->WrapAsSlice(std::move(batch.buffer), batch.bytes)};
  return grpc::ByteBuffer(slices, 2);
}

void GrpcDelivery::DescribeIn(v1::StreamHeader* header) {
  header->set_transport(v1::TRANSPORT_GRPC);
}

ShmDelivery::ShmDelivery(std::shared_ptr<ShmRing> ring, FdServer* fd_server,
                         std::shared_ptr<ShmRing> shared_ring)
    : ring_(std::move(ring)),
      fd_server_(fd_server),
      token_(fd_server_->Register(ring_)),
      shared_ring_(std::move(shared_ring)),
      shared_token_(shared_ring_ ? fd_server_->Register(shared_ring_) : "") {}

ShmDelivery::~ShmDelivery() {
  fd_server_->Unregister(token_);
  if (shared_ring_) fd_server_->Unregister(shared_token_);
}

v1::StreamResponse ShmDelivery::Describe(service::ReadyBatch batch) {
  Sent sent;
  bool in_shared_ring = false;
  uint32_t shared_slot = 0;
  if (const service::BatchBuffer* lender = batch.buffer->lender()) {
    std::unique_ptr<service::BatchBuffer> own = batch.buffer->TakeOwn();
    const service::BatchBuffer::Home run_slot = lender->home();
    if (shared_ring_ != nullptr && run_slot.owner == shared_ring_.get()) {
      in_shared_ring = true;
      shared_slot = run_slot.index;
      sent.lent = std::move(batch.buffer);
    } else {
      // The client cannot see the run's buffer: it gets a copy.
      std::memcpy(own->data(), batch.buffer->data(), batch.bytes);
    }
    batch.buffer = std::move(own);
  }
  // Every buffer of this stream is a slot of its ring.
  sent.slot = batch.buffer->home().index;
  const uint32_t slot = in_shared_ring ? shared_slot : sent.slot;
  {
    absl::MutexLock lock(&mu_);
    sent_[{batch.epoch, batch.step}] = std::move(sent);
  }
  v1::StreamResponse response;
  FillBatchMetadata(batch, response.mutable_batch());
  response.mutable_batch()->set_slot(slot);
  response.mutable_batch()->set_in_shared_ring(in_shared_ring);
  // The slots stay the client's until it acknowledges the batch; dropping
  // the stream's buffer object here does not free its slot.
  return response;
}

void ShmDelivery::Acked(uint64_t epoch, uint64_t step) {
  Sent sent;
  {
    absl::MutexLock lock(&mu_);
    auto it = sent_.find({epoch, step});
    if (it == sent_.end()) return;
    sent = std::move(it->second);
    sent_.erase(it);
  }
  ring_->Release(sent.slot);
  // sent.lent goes here, outside the lock: the run may take its buffer back.
}

void ShmDelivery::DescribeIn(v1::StreamHeader* header) {
  header->set_transport(v1::TRANSPORT_SHM);
  v1::ShmRing* shm = header->mutable_shm();
  shm->set_fd_socket(fd_server_->path());
  shm->set_token(token_);
  shm->set_slots(ring_->slots());
  shm->set_slot_bytes(ring_->slot_bytes());
  if (shared_ring_ != nullptr) {
    v1::ShmRing* shared = header->mutable_shared_ring();
    shared->set_fd_socket(fd_server_->path());
    shared->set_token(shared_token_);
    shared->set_slots(shared_ring_->slots());
    shared->set_slot_bytes(shared_ring_->slot_bytes());
  }
}

}  // namespace stoker::transport
