// What the client's files share: the client's connection, and the status
// and dtype conversions.
#ifndef STOKER_CLIENT_LIB_INTERNAL_H_
#define STOKER_CLIENT_LIB_INTERNAL_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.grpc.pb.h"

namespace stoker {

class MessagePool;  // stream_call.h

struct Client::Impl {
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Stoker::Stub> stub;
  // Its streams' received messages, for reuse (stream_call.h).
  std::shared_ptr<MessagePool> messages;
};

absl::Status FromGrpc(const grpc::Status& s);

// The client's DType of a wire dtype; kUnknown for one this client does not
// know (a newer daemon's).
DType FromProto(v1::DType t);

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_INTERNAL_H_
