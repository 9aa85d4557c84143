// The client's transport seam: what one transport does on this side of a
// stream, and the registry that finds it by name. The model is the Python
// client's Transport class (client/python/stoker/transports.py).
//
// A stream is a gRPC call (stream.cc runs the protocol on it: open with
// fallback, acks, reconnect and resume). Its transport decides the rest:
// what it adds to the open request, what it sets up from the header (maps
// rings, connects sockets), where a batch's bytes lie, whether the client
// holds a batch's memory until it releases it (then the ack waits for the
// release), and whether messages and acks go on a channel of its own.
//
// A transport is one folder under client/lib/, registered by name with its
// place in "auto" (tried in increasing order; 0: never tried by "auto"):
//
//   std::unique_ptr<ClientTransport> MakeShm() { ... }
//   STOKER_REGISTER_CLIENT_TRANSPORT(v1::TRANSPORT_SHM, "shm", 1, MakeShm);
#ifndef STOKER_CLIENT_LIB_TRANSPORT_H_
#define STOKER_CLIENT_LIB_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker {

// A connection, other than the call, that batches are announced on and
// acks go back on (shm's notice socket).
class ClientSideChannel {
 public:
  virtual ~ClientSideChannel() = default;
  // The next message: true with one; false once the daemon ended the
  // channel (or Shutdown() was called). DataLoss for a bad frame.
  virtual absl::StatusOr<bool> Read(v1::StreamResponse* response) = 0;
  virtual void Write(const v1::StreamRequest& request) = 0;
  // Wakes a blocked Read(); from any thread.
  virtual void Shutdown() = 0;
  // After Read() returned false: whether it ended inside a message.
  virtual bool truncated() const = 0;
  virtual const std::string& path() const = 0;
};

// Where a batch's bytes lie, and what must live as long as views of them.
struct BatchBytes {
  const uint8_t* base = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> keep;  // Null when the message holds them.
  int device = -1;  // >= 0: device memory on this CUDA device (cuda_ipc).
};

// One transport for one connection of a stream.
class ClientTransport {
 public:
  virtual ~ClientTransport() = default;
  // Fills what this transport asks for in the open request.
  virtual void Prepare(v1::OpenStream* open) {}
  // Sets up from the daemon's header.
  virtual absl::Status Attach(const v1::StreamHeader& header) = 0;
  // Whether a thread should take messages off the call while the caller
  // works (large payloads travel in them).
  virtual bool read_ahead() const = 0;
  // Whether a batch's memory is the client's until it releases the batch:
  // its ack waits for the release. Otherwise a batch is acked on receipt.
  virtual bool holds() const = 0;
  // Where the bytes of `batch` lie; DataLoss when it names memory this
  // transport does not have.
  virtual absl::StatusOr<BatchBytes> Locate(const v1::Batch& batch) = 0;
  // Set after Attach() when batches come on a channel of its own.
  virtual ClientSideChannel* side_channel() { return nullptr; }
};

using ClientTransportFactory = std::function<std::unique_ptr<ClientTransport>()>;

struct ClientTransportDef {
  v1::Transport number;
  std::string name;
  ClientTransportFactory make;
  // Where "auto" tries it: 1 first, then 2, ...; 0: "auto" never does.
  int auto_place = 0;
};

// The transports to try for `spec`: a name, "auto" (the registered
// transports with a place in it, in that order: shm, then grpc), or a
// comma-separated list tried in order. A name the protocol knows but this
// client has no class for gives a def without `make`, which the caller
// refuses as it would a daemon's refusal, so that a list falls back past
// it. InvalidArgument for a name nobody knows.
absl::StatusOr<std::vector<ClientTransportDef>> ParseTransports(
    absl::string_view spec);
// The name of transport `number`, as the daemon's header gives it.
std::string TransportName(v1::Transport number);

class ClientTransportRegistrar {
 public:
  ClientTransportRegistrar(v1::Transport number, const char* name,
                           int auto_place, ClientTransportFactory factory);
};

#define STOKER_REGISTER_CLIENT_TRANSPORT(number, name, auto_place, factory) \
  static const ::stoker::ClientTransportRegistrar                           \
      stoker_client_transport_registrar_##factory(number, name, auto_place, \
                                                  factory)

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_TRANSPORT_H_
