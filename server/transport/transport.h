// The transport seam: what a transport does with a stream's batches, and
// the registry that finds a transport by the number a client asks for.
//
// Every stream is a gRPC call (rpc/stream_reactor.h): the call carries the
// open, the header and the final status, and the StreamSession
// (service/stream_session.h) keeps the window. A transport decides the rest:
//
//   - where the stream's batch buffers come from (Delivery::Take), and when
//     a stream whose batches are all sent may end (Delivery::MayEnd);
//   - how a ready batch is handed over (Delivery::HandOver): a message that
//     describes it, plus the batch bytes when they travel in that message,
//     encoded as the request asked (Delivery::encoder);
//   - what the client must know to read batches (Delivery::DescribeIn);
//   - whether batches go on a channel of its own instead of the call
//     (Delivery::side_channel);
//   - whether its client holds batches in the transport's memory after
//     reading them (Transport::client_holds), which widens the window;
//   - whether it formats images itself as it delivers them
//     (Transport::formats_on_delivery: cuda_ipc, on the GPU).
//
// A transport is one folder under server/transport/ with its own library,
// registered by name with STOKER_REGISTER_TRANSPORT (linked whole-archive
// into the daemon, as the ops are):
//
//   std::unique_ptr<Transport> MakeShm(const TransportEnv& env) { ... }
//   STOKER_REGISTER_TRANSPORT(v1::TRANSPORT_SHM, "shm", MakeShm);
//
// The reactor converts the handover to gRPC's types and forwards it; it
// knows no transport by name.
#ifndef STOKER_SERVER_TRANSPORT_TRANSPORT_H_
#define STOKER_SERVER_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/service/batch.h"
#include "server/service/batch_encoder.h"
#include "server/service/stream_service.h"
#include "server/service/stream_session.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

// A ready batch as it goes to the client.
struct Handover {
  // Describes the batch (StreamResponse.batch); never holds its bytes.
  v1::StreamResponse message;
  // Set when the batch bytes travel in the message, as Batch.payload: the
  // first `payload_bytes` of this buffer. Dropping it gives the buffer back
  // to its transport, whenever the wire is done with it.
  std::unique_ptr<service::BatchBuffer> payload;
  size_t payload_bytes = 0;
};

// A connection of a transport's own that batches are announced on, and
// acks come back on, instead of the call (shm's notice socket).
class SideChannel {
 public:
  struct Hooks {
    std::function<void()> connected;  // The client connected.
    // A request from the client (acks).
    std::function<void(const v1::StreamRequest&)> request;
    // The client went away before End(), or broke the protocol.
    std::function<void(const absl::Status&)> lost;
  };

  virtual ~SideChannel() = default;
  virtual bool connected() const = 0;
  virtual void Send(const v1::StreamResponse& message) = 0;
  // After what was sent, ends the channel; the call then carries the status.
  virtual void End() = 0;
  // No hook runs once this returns.
  virtual void Detach() = 0;
};

// What a transport does with one stream's batch slots. Thread-safe.
class Delivery : public service::BufferSlots {
 public:
  // Takes the batch's buffer. A transport with a side channel hands over
  // no payload.
  virtual Handover HandOver(service::ReadyBatch batch) = 0;
  // The client acknowledged the batch at (epoch, step), which was sent.
  virtual void Acked(uint64_t epoch, uint64_t step) = 0;
  // Adds what the client needs to read batches to the stream header.
  virtual void DescribeIn(v1::StreamHeader* header) = 0;
  // `hook` runs when a buffer comes back other than through an ack, or when
  // MayEnd may have changed; cleared (and never run again) by
  // ClearReturnHook.
  virtual void SetReturnHook(std::function<void()> hook) = 0;
  virtual void ClearReturnHook() = 0;
  // Where batches go instead of the call, or null. Owned by the delivery.
  virtual SideChannel* side_channel() { return nullptr; }
  // How the batches the stream builds itself are encoded on the wire, run
  // by the stream on its workers (service/batch_encoder.h); null: as they
  // are. Only a transport whose messages carry the batch bytes (grpc) has
  // one: a request's OpenStream.compression means nothing to the others.
  virtual std::shared_ptr<const service::BatchEncoder> encoder() const {
    return nullptr;
  }
};

// What a transport gets to set up one stream.
struct OpenContext {
  const v1::OpenStream& open;
  const service::OpenedStream& opened;
  // For a side channel, if the client asked for one.
  SideChannel::Hooks hooks;
};

// Where the daemon listens, for transports that hand out sockets of their
// own next to it.
struct TransportEnv {
  std::string unix_path;  // The daemon's unix socket; empty: none.
  uint32_t unix_mode = 0660;
  // The group also let in; < 0: only the daemon's uid (and root).
  int64_t unix_group = -1;
  // Device memory cuda_ipc streams may hold on each GPU
  // (device_memory_budget).
  uint64_t device_memory_budget = 2ull << 30;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // OK, or FAILED_PRECONDITION saying why this daemon cannot serve it.
  virtual absl::Status Available() const = 0;
  // Whether the client keeps batches in the transport's memory after
  // reading them, until it releases them (StreamSession::Window).
  virtual bool client_holds() const = 0;
  // Whether the stream's pipeline stops before its format stage (the uint8
  // HWC rendering, BindMode::kRendered) and the transport formats the
  // images as it delivers them (OpenedStream::formatted says how).
  virtual bool formats_on_delivery() const { return false; }
  // Sets up one stream. REQUIRES: Available().
  virtual absl::StatusOr<std::shared_ptr<Delivery>> Open(
      const OpenContext& context) = 0;
  // Runs before the daemon accepts calls, and after the last call ended.
  virtual absl::Status Start() { return absl::OkStatus(); }
  virtual void Stop() {}
  // This transport's own counters (not a stream's), for /metrics.
  virtual std::vector<service::NamedCount> Counters() const { return {}; }
  // Memory a shared run builds its batches in so that this transport's
  // clients read them in place; null when the transport has none.
  virtual absl::StatusOr<std::shared_ptr<service::BufferSource>> RunMemory(
      uint32_t count, size_t bytes, std::shared_ptr<void> hold) {
    return std::shared_ptr<service::BufferSource>();
  }
};

using TransportFactory =
    std::function<std::unique_ptr<Transport>(const TransportEnv&)>;

// The daemon's transports, one of each registered, made from `env`.
class Transports {
 public:
  explicit Transports(const TransportEnv& env);

  // The transport for `number`, or: INVALID_ARGUMENT for a number the
  // protocol does not know, FAILED_PRECONDITION (saying why) for one this
  // daemon cannot serve. TRANSPORT_UNSPECIFIED is grpc.
  absl::StatusOr<Transport*> Find(v1::Transport number) const;
  // Its name ("grpc", "shm", ...), as metrics and logs label streams.
  static std::string Name(v1::Transport number);

  // Each transport's Start, in registration order; the first error.
  absl::Status Start();
  void Stop();
  // Every transport's Counters().
  std::vector<service::NamedCount> Counters() const;
  // The first transport's run memory; null if none offers any.
  absl::StatusOr<std::shared_ptr<service::BufferSource>> RunMemory(
      uint32_t count, size_t bytes, std::shared_ptr<void> hold);

 private:
  struct Entry {
    v1::Transport number;
    std::unique_ptr<Transport> transport;
  };
  std::vector<Entry> entries_;
};

class TransportRegistrar {
 public:
  TransportRegistrar(v1::Transport number, const char* name,
                     TransportFactory factory);
};

#define STOKER_REGISTER_TRANSPORT(number, name, factory)               \
  static const ::stoker::transport::TransportRegistrar                 \
      stoker_transport_registrar_##factory(number, name, factory)

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_TRANSPORT_H_
