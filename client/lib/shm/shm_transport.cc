// The shm transport, client side: the stream's ring (and the shared run's,
// when the daemon lends batches in place) is mapped once from the header; a
// message names a slot, whose bytes are the client's until it releases the
// batch. Messages are a few hundred bytes, so there is nothing to overlap:
// the caller reads them itself, from the notice socket where the daemon
// grants one (a system call each, where a gRPC message costs hand-overs
// inside gRPC).
#include <memory>

#include "client/lib/shm/notice_socket.h"
#include "client/lib/shm/shm_mapping.h"
#include "client/lib/transport.h"

namespace stoker {
namespace {

class ShmClientTransport : public ClientTransport {
 public:
  void Prepare(v1::OpenStream* open) override {
    open->set_map_shared_ring(true);
    open->set_notice_socket(true);
  }

  absl::Status Attach(const v1::StreamHeader& header) override {
    // The shared ring first: the daemon may end a short stream as soon as
    // the stream's own ring is handed over.
    if (header.has_shared_ring()) {
      auto shared = MapShmRing(header.shared_ring());
      if (!shared.ok()) return shared.status();
      shared_ = *std::move(shared);
    }
    if (!header.has_shm()) {
      return absl::InternalError("an shm stream's header names no ring");
    }
    auto own = MapShmRing(header.shm());
    if (!own.ok()) return own.status();
    own_ = *std::move(own);
    if (header.has_notices()) {
      // The daemon sends no batch before we connect.
      auto notices = NoticeSocket::Connect(header.notices());
      if (!notices.ok()) return notices.status();
      notices_ = *std::move(notices);
    }
    return absl::OkStatus();
  }

  bool read_ahead() const override { return false; }
  bool holds() const override { return true; }

  absl::StatusOr<BatchBytes> Locate(const v1::Batch& b) override {
    const std::shared_ptr<ShmMapping>& ring =
        b.in_shared_ring() ? shared_ : own_;
    if (ring == nullptr || b.slot() >= ring->slots) {
      return SlotOutOfRange(
          b, b.in_shared_ring() ? "the shared ring" : "the stream's ring",
          ring == nullptr ? 0 : ring->slots);
    }
    return BatchBytes{ring->base + b.slot() * ring->slot_bytes,
                      ring->slot_bytes, ring};
  }

  ClientSideChannel* side_channel() override { return notices_.get(); }

 private:
  std::shared_ptr<ShmMapping> own_;
  // The ring of the shared run the stream joined, if the daemon lends it
  // batches in place (Batch.in_shared_ring).
  std::shared_ptr<ShmMapping> shared_;
  std::unique_ptr<NoticeSocket> notices_;
};

std::unique_ptr<ClientTransport> MakeShmClientTransport() {
  return std::make_unique<ShmClientTransport>();
}

}  // namespace

STOKER_REGISTER_CLIENT_TRANSPORT(v1::TRANSPORT_SHM, "shm", /*auto_place=*/1,
                                 MakeShmClientTransport);

}  // namespace stoker
