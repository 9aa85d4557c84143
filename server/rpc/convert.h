// Conversions to and from gRPC's types (the stoker.v1 messages themselves:
// wire.h).
#ifndef STOKER_SERVER_RPC_CONVERT_H_
#define STOKER_SERVER_RPC_CONVERT_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/transport/transport.h"
#include "server/transport/wire.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Parses a message that arrived as raw bytes.
bool ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                         google::protobuf::MessageLite* message);
grpc::ByteBuffer SerializeToByteBuffer(
    const google::protobuf::MessageLite& message);

// The wire bytes of StreamResponse{batch: meta + payload} up to, not
// including, the `payload_bytes` of the payload themselves. Sending this
// followed by the payload slice is byte for byte the serialized message, so
// the payload travels without a copy.
std::string BatchWirePrefix(const v1::Batch& meta, size_t payload_bytes);

// A handover as a message on the call: the payload, if any, as a slice of
// its buffer, which is dropped (given back) once gRPC releases the slice.
grpc::ByteBuffer Encode(transport::Handover handover);

}  // namespace stoker::rpc

#endif  // STOKER_SERVER_RPC_CONVERT_H_
