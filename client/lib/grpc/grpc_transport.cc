// The grpc transport, client side: batch bytes arrive in the message, as
// its payload; a thread takes messages off the wire while the caller works,
// and each batch is acked on receipt (its bytes are the client's). A
// compressed payload is decoded into a buffer of its own, which the batch
// keeps.
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/lib/transport.h"
#include "proto/payload_codec.h"

namespace stoker {
namespace {

constexpr uint64_t kMaxDecodedBytes = uint64_t{1} << 34;

class GrpcClientTransport : public ClientTransport {
 public:
  absl::Status Attach(const v1::StreamHeader&) override {
    return absl::OkStatus();
  }
  bool read_ahead() const override { return true; }
  bool holds() const override { return false; }
  absl::StatusOr<BatchBytes> Locate(const v1::Batch& batch) override {
    const auto* payload =
        reinterpret_cast<const uint8_t*>(batch.payload().data());
    switch (batch.compression()) {
      case v1::COMPRESSION_NONE:
        return BatchBytes{payload, batch.payload().size(), nullptr};
      case v1::COMPRESSION_ZSTD:
        break;
      default:
        return absl::DataLossError(
            absl::StrCat("batch of epoch ", batch.epoch(), " step ",
                         batch.step(), " is encoded as ",
                         v1::Compression_Name(batch.compression()),
                         ", which this client cannot decode"));
    }
    const uint64_t size = batch.decoded_bytes();
    if (size > kMaxDecodedBytes) {
      return absl::DataLossError(absl::StrCat(
          "batch of epoch ", batch.epoch(), " step ", batch.step(),
          " claims ", size, " decoded bytes"));
    }
    std::shared_ptr<uint8_t[]> decoded(new uint8_t[size]);
    if (absl::Status s = codec::Decompress(payload, batch.payload().size(),
                                           decoded.get(), size);
        !s.ok()) {
      return s;
    }
    const uint8_t* base = decoded.get();
    return BatchBytes{base, size, std::move(decoded)};
  }
};

std::unique_ptr<ClientTransport> MakeGrpcClientTransport() {
  return std::make_unique<GrpcClientTransport>();
}

}  // namespace

STOKER_REGISTER_CLIENT_TRANSPORT(v1::TRANSPORT_GRPC, "grpc", /*auto_place=*/2,
                                 MakeGrpcClientTransport);

}  // namespace stoker
