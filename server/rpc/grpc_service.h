// GrpcService: the stoker.v1.Stoker service over gRPC's callback API. A thin
// adapter: each handler converts and forwards to service::StreamService.
// Thread-safe.
#ifndef STOKER_SERVER_RPC_GRPC_SERVICE_H_
#define STOKER_SERVER_RPC_GRPC_SERVICE_H_

#include <functional>

#include <grpcpp/grpcpp.h>

#include "server/metrics/daemon_stats.h"
#include "server/service/opener.h"
#include "server/service/stream_service.h"
#include "server/rpc/unix_acceptor.h"
#include "server/transport/transport.h"
#include "stoker/v1/stoker.grpc.pb.h"

namespace stoker::rpc {

// Stream is registered raw (ByteBuffer) so batches go out without a copy;
// its messages are still stoker.v1.StreamRequest / StreamResponse.
using StokerBase = v1::Stoker::WithCallbackMethod_ListDatasets<
    v1::Stoker::WithCallbackMethod_ListPipelines<
        v1::Stoker::WithRawCallbackMethod_Stream<
            v1::Stoker::WithCallbackMethod_GetStats<v1::Stoker::Service>>>>;

class GrpcService final : public StokerBase {
 public:
  // `service`, `opener` and `transports` must outlive the gRPC server this
  // is registered with.
  GrpcService(service::StreamService* service, service::Opener* opener,
              const transport::Transports* transports)
      : service_(service), opener_(opener), transports_(transports) {}

  grpc::ServerUnaryReactor* ListDatasets(
      grpc::CallbackServerContext* context,
      const v1::ListDatasetsRequest* request,
      v1::ListDatasetsResponse* response) override;
  grpc::ServerUnaryReactor* ListPipelines(
      grpc::CallbackServerContext* context,
      const v1::ListPipelinesRequest* request,
      v1::ListPipelinesResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::DaemonStats* response) override;

  // Where GetStats reads its snapshot; without one it is UNIMPLEMENTED.
  // REQUIRES: called before the gRPC server starts.
  void SetStatsSource(std::function<metrics::DaemonStats()> source) {
    stats_source_ = std::move(source);
  }
  // Names the uid behind each unix-socket connection; null without one.
  // REQUIRES: called before the gRPC server starts.
  void SetUnixAcceptor(const UnixAcceptor* acceptor) { acceptor_ = acceptor; }

 private:
  service::StreamService* const service_;
  service::Opener* const opener_;
  const transport::Transports* const transports_;
  std::function<metrics::DaemonStats()> stats_source_;
  const UnixAcceptor* acceptor_ = nullptr;
};

}  // namespace stoker::rpc

#endif  // STOKER_SERVER_RPC_GRPC_SERVICE_H_
