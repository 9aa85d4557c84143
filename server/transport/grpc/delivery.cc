#include "server/transport/grpc/delivery.h"

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

ShmDelivery::ShmDelivery(std::shared_ptr<ShmRing> ring, FdServer* fd_server)
    : ring_(std::move(ring)),
      fd_server_(fd_server),
      token_(fd_server_->Register(ring_)) {}

ShmDelivery::~ShmDelivery() { fd_server_->Unregister(token_); }

grpc::ByteBuffer ShmDelivery::Encode(service::ReadyBatch batch) {
  const uint32_t slot =
      static_cast<ShmSlotBuffer*>(batch.buffer.get())->slot();
  {
    absl::MutexLock lock(&mu_);
    sent_[{batch.epoch, batch.step}] = slot;
  }
  v1::StreamResponse response;
  FillBatchMetadata(batch, response.mutable_batch());
  response.mutable_batch()->set_slot(slot);
  // The slot stays the client's until it acknowledges the batch; dropping
  // the buffer object here does not free it.
  return SerializeToByteBuffer(response);
}

void ShmDelivery::Acked(uint64_t epoch, uint64_t step) {
  uint32_t slot;
  {
    absl::MutexLock lock(&mu_);
    auto it = sent_.find({epoch, step});
    if (it == sent_.end()) return;
    slot = it->second;
    sent_.erase(it);
  }
  ring_->Release(slot);
}

void ShmDelivery::DescribeIn(v1::StreamHeader* header) {
  header->set_transport(v1::TRANSPORT_SHM);
  v1::ShmRing* shm = header->mutable_shm();
  shm->set_fd_socket(fd_server_->path());
  shm->set_token(token_);
  shm->set_slots(ring_->slots());
  shm->set_slot_bytes(ring_->slot_bytes());
}

}  // namespace stoker::transport
