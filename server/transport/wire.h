// Conversions between the service's plain types and the stoker.v1 messages
// every transport speaks. gRPC's own types are in rpc/convert.h.
#ifndef STOKER_SERVER_TRANSPORT_WIRE_H_
#define STOKER_SERVER_TRANSPORT_WIRE_H_

#include "server/service/batch.h"
#include "server/service/stream.h"
#include "server/tensor/tensor_spec.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

// The request as plain values; `transport` is left to the caller, which
// knows the transport it found.
service::StreamSpec ToSpec(const v1::OpenStream& open);
v1::DType ToProto(tensor::DType dtype);
void ToProto(const tensor::TensorSpec& spec, v1::TensorSpec* out);
// Sets a Batch's epoch, step, sample ids and tensor specs (not the payload).
void FillBatchMetadata(const service::ReadyBatch& batch, v1::Batch* out);

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_WIRE_H_
