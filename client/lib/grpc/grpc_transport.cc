// The grpc transport, client side: batch bytes arrive in the message, as
// its payload; a thread takes messages off the wire while the caller works,
// and each batch is acked on receipt (its bytes are the client's).
#include "client/lib/transport.h"

namespace stoker {
namespace {

class GrpcClientTransport : public ClientTransport {
 public:
  absl::Status Attach(const v1::StreamHeader&) override {
    return absl::OkStatus();
  }
  bool read_ahead() const override { return true; }
  bool holds() const override { return false; }
  absl::StatusOr<BatchBytes> Locate(const v1::Batch& batch) override {
    return BatchBytes{reinterpret_cast<const uint8_t*>(batch.payload().data()),
                      batch.payload().size(), nullptr};
  }
};

std::unique_ptr<ClientTransport> MakeGrpcClientTransport() {
  return std::make_unique<GrpcClientTransport>();
}

}  // namespace

STOKER_REGISTER_CLIENT_TRANSPORT(v1::TRANSPORT_GRPC, "grpc",
                                 MakeGrpcClientTransport);

}  // namespace stoker
