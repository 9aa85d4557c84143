// The shm transport: for a client on the same node. Each stream gets a ring
// of memfd slots (shm_ring.h) that the client maps once, through the
// descriptor socket (fd_server.h) beside the daemon's unix socket; a batch
// is built in its slot, the message on the call (or on the notice socket,
// notice_channel.h, if the client asks for one) carries only the slot id,
// and the client's ack frees the slot. A batch lent by a shared run stays
// in the run's ring, which the client maps as a second ring, until the ack.
#ifndef STOKER_SERVER_TRANSPORT_SHM_SHM_TRANSPORT_H_
#define STOKER_SERVER_TRANSPORT_SHM_SHM_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/transport/shm/fd_server.h"
#include "server/transport/shm/notice_channel.h"
#include "server/transport/shm/shm_ring.h"
#include "server/transport/transport.h"

namespace stoker::transport {

class ShmDelivery : public Delivery {
 public:
  // `fd_server` outlives every stream (the composition root stops the gRPC
  // server first). `shared_ring`, if not null, is the ring of the shared run
  // the stream joined, offered to a client that maps it; batches lent from
  // anywhere else are copied into the stream's own slot. `channel`, if not
  // null, is the stream's notice socket.
  ShmDelivery(std::shared_ptr<ShmRing> ring, FdServer* fd_server,
              std::shared_ptr<ShmRing> shared_ring,
              std::shared_ptr<NoticeChannel> channel);
  ~ShmDelivery() override;
  std::unique_ptr<service::BatchBuffer> Take() override {
    return ring_->Take();
  }
  Handover HandOver(service::ReadyBatch batch) override;
  void Acked(uint64_t epoch, uint64_t step) override;
  // Once the client has fetched the ring, which ending would free. The
  // client may hold its last batches after the end (their slots stay
  // valid, since nothing refills them), so acks are not awaited.
  bool MayEnd(uint32_t) const override { return ring_->handed_over(); }
  void DescribeIn(v1::StreamHeader* header) override;
  void SetReturnHook(std::function<void()> hook) override {
    ring_->SetHandOverHook(std::move(hook));
  }
  void ClearReturnHook() override { ring_->ClearHandOverHook(); }
  SideChannel* side_channel() override { return channel_.get(); }

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
  const std::shared_ptr<NoticeChannel> channel_;

  absl::Mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Sent> sent_ ABSL_GUARDED_BY(mu_);
};

class ShmTransport : public Transport {
 public:
  // Its descriptor socket is `env.unix_path` + ".shm"; without a unix
  // socket the transport is there but refuses every stream.
  explicit ShmTransport(const TransportEnv& env);

  absl::Status Available() const override;
  bool client_holds() const override { return true; }
  absl::StatusOr<std::shared_ptr<Delivery>> Open(
      const OpenContext& context) override;
  absl::Status Start() override;
  void Stop() override;
  // A memfd ring, offered to the shm clients of the run.
  absl::StatusOr<std::shared_ptr<service::BufferSource>> RunMemory(
      uint32_t count, size_t bytes, std::shared_ptr<void> hold) override;

  // The descriptor socket's refusals, late tokens and failed accepts.
  std::vector<service::NamedCount> Counters() const override;

  // Null without a unix socket.
  FdServer* fd_server() { return fd_server_.get(); }

 private:
  std::unique_ptr<FdServer> fd_server_;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHM_SHM_TRANSPORT_H_
