// Conversions between the stoker.v1 wire types and the service's plain
// types. The only place that knows both.
#ifndef STOKER_SERVER_TRANSPORT_GRPC_CONVERT_H_
#define STOKER_SERVER_TRANSPORT_GRPC_CONVERT_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/pipeline/tensor.h"
#include "server/service/batch.h"
#include "server/service/stream.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

grpc::Status ToGrpcStatus(const absl::Status& status);
service::StreamSpec ToSpec(const v1::OpenStream& open);
v1::DType ToProto(pipeline::DType dtype);
void ToProto(const pipeline::TensorSpec& spec, v1::TensorSpec* out);

// Parses a message that arrived as raw bytes.
bool ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                         google::protobuf::MessageLite* message);
grpc::ByteBuffer SerializeToByteBuffer(
    const google::protobuf::MessageLite& message);

// Sets a Batch's epoch, step, sample ids and tensor specs (not the payload).
void FillBatchMetadata(const service::ReadyBatch& batch, v1::Batch* out);

// The wire bytes of StreamResponse{batch: <batch metadata>, payload: ...}
// up to, not including, the payload bytes themselves. Sending this followed
// by the payload slice is byte for byte the serialized message, so the
// payload travels without a copy.
std::string BatchWirePrefix(const service::ReadyBatch& batch);

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_GRPC_CONVERT_H_
