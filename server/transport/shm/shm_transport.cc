#include "server/transport/shm/shm_transport.h"

#include <cstring>

#include "server/transport/wire.h"

namespace stoker::transport {

ShmDelivery::ShmDelivery(std::shared_ptr<ShmRing> ring, FdServer* fd_server,
                         std::shared_ptr<ShmRing> shared_ring,
                         std::shared_ptr<NoticeChannel> channel)
    : ring_(std::move(ring)),
      fd_server_(fd_server),
      token_(fd_server_->Register(ring_)),
      shared_ring_(std::move(shared_ring)),
      shared_token_(shared_ring_ ? fd_server_->Register(shared_ring_) : ""),
      channel_(std::move(channel)) {}

ShmDelivery::~ShmDelivery() {
  fd_server_->Unregister(token_);
  if (shared_ring_) fd_server_->Unregister(shared_token_);
}

Handover ShmDelivery::HandOver(service::ReadyBatch batch) {
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
  Handover handover;
  v1::Batch* described = handover.message.mutable_batch();
  FillBatchMetadata(batch, described);
  described->set_slot(slot);
  described->set_in_shared_ring(in_shared_ring);
  // The slots stay the client's until it acknowledges the batch; dropping
  // the stream's buffer object here does not free its slot.
  return handover;
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
  if (channel_ != nullptr) {
    header->mutable_notices()->set_path(channel_->path());
    header->mutable_notices()->set_token(channel_->token());
  }
}

ShmTransport::ShmTransport(const TransportEnv& env) {
  if (!env.unix_path.empty()) {
    fd_server_ = std::make_unique<FdServer>(
        env.unix_path + ".shm", env.unix_mode, env.unix_group);
  }
}

absl::Status ShmTransport::Available() const {
  if (fd_server_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "the shm transport needs the daemon's unix socket (listen.unix), which "
      "this daemon does not have; use transport grpc");
}

absl::StatusOr<std::shared_ptr<Delivery>> ShmTransport::Open(
    const OpenContext& context) {
  const service::OpenedStream& opened = context.opened;
  auto ring = ShmRing::Create("stoker-ring", opened.window,
                              opened.batch_bytes, opened.ticket);
  if (!ring.ok()) return ring.status();
  std::shared_ptr<ShmRing> shared_ring;
  if (context.open.map_shared_ring()) {
    shared_ring = fd_server_->RunRing(opened.run_memory.get());
  }
  std::shared_ptr<NoticeChannel> channel;
  if (context.open.notice_socket()) {
    channel = NoticeChannel::Create(fd_server_.get(), context.hooks);
  }
  return std::make_shared<ShmDelivery>(*std::move(ring), fd_server_.get(),
                                       std::move(shared_ring),
                                       std::move(channel));
}

absl::Status ShmTransport::Start() {
  return fd_server_ != nullptr ? fd_server_->Start() : absl::OkStatus();
}

void ShmTransport::Stop() {
  if (fd_server_ != nullptr) fd_server_->Stop();
}

std::vector<service::NamedCount> ShmTransport::Counters() const {
  const FdServer::Stats s =
      fd_server_ != nullptr ? fd_server_->GetStats() : FdServer::Stats{};
  return {
      {"stoker_shm_socket_refused_total",
       "Connections to the shm descriptor socket closed at once: over the "
       "bound per process or in all (FdServer::kMaxPendingPerPeer, "
       "kMaxPending).",
       static_cast<double>(s.refused), false, {}},
      {"stoker_shm_socket_timed_out_total",
       "Connections to the shm descriptor socket dropped for not presenting "
       "their token in time (FdServer::kTokenWait).",
       static_cast<double>(s.timed_out), false, {}},
      {"stoker_shm_socket_accept_failures_total",
       "Failed accepts on the shm descriptor socket (EMFILE and kin: the "
       "daemon is out of descriptors).",
       static_cast<double>(s.accept_failures), false, {}},
  };
}

absl::StatusOr<std::shared_ptr<service::BufferSource>> ShmTransport::RunMemory(
    uint32_t count, size_t bytes, std::shared_ptr<void> hold) {
  auto ring = ShmRing::Create("stoker-shared-run", count, bytes,
                              std::move(hold));
  if (!ring.ok()) return ring.status();
  if (fd_server_ != nullptr) fd_server_->AddRunRing(*ring);
  return std::shared_ptr<service::BufferSource>(*std::move(ring));
}

namespace {
std::unique_ptr<Transport> MakeShmTransport(const TransportEnv& env) {
  return std::make_unique<ShmTransport>(env);
}
}  // namespace

STOKER_REGISTER_TRANSPORT(v1::TRANSPORT_SHM, "shm", MakeShmTransport);

}  // namespace stoker::transport
