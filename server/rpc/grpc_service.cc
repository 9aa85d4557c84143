#include "server/rpc/grpc_service.h"

#include "server/rpc/convert.h"
#include "server/rpc/stats_convert.h"
#include "server/rpc/stream_reactor.h"

namespace stoker::transport {

grpc::ServerUnaryReactor* GrpcService::ListDatasets(
    grpc::CallbackServerContext* context, const v1::ListDatasetsRequest*,
    v1::ListDatasetsResponse* response) {
  for (const auto& [name, ds] : service_->catalog()->datasets()) {
    const dataset::Manifest& m = ds->manifest();
    v1::DatasetInfo* info = response->add_datasets();
    info->set_name(name);
    info->set_num_samples(m.num_samples);
    info->set_num_shards(static_cast<uint32_t>(m.shards.size()));
    uint64_t bytes = 0;
    for (const dataset::ShardInfo& s : m.shards) bytes += s.bytes;
    info->set_bytes(bytes);
    for (const std::string& c : m.classes) info->add_classes(c);
    for (const dataset::FieldSpec& f : m.fields) info->add_fields(f.name);
    info->set_manifest_digest(dataset::ManifestDigest(m));
    // Computed from the records on the first call, then kept.
    if (absl::StatusOr<std::string> digest = ds->ContentDigest(); digest.ok()) {
      info->set_content_digest(*digest);
    }
  }
  // Datasets being staged, not yet servable: listed with their progress.
  if (stats_source_) {
    const auto catalog = service_->catalog();
    for (const staging::StageStatus& s : stats_source_().staging) {
      if (catalog->datasets().count(s.dataset) != 0) continue;
      v1::DatasetInfo* info = response->add_datasets();
      info->set_name(s.dataset);
      info->set_num_samples(s.num_samples);
      info->set_num_shards(static_cast<uint32_t>(s.shards_total));
      info->set_bytes(s.bytes_total);
      info->set_staging(staging::DescribeProgress(s));
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GrpcService::ListPipelines(
    grpc::CallbackServerContext* context, const v1::ListPipelinesRequest*,
    v1::ListPipelinesResponse* response) {
  const auto catalog = service_->catalog();
  for (const auto& [name, p] : catalog->pipelines()) {
    v1::PipelineInfo* info = response->add_pipelines();
    info->set_name(name);
    for (const std::string& op : p->op_names()) info->add_ops(op);
    for (const tensor::TensorSpec& t : catalog->OutputsOf(*p)) {
      ToProto(t, info->add_outputs());
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GrpcService::Stream(grpc::CallbackServerContext* context) {
  return new StreamReactor(service_, opener_, transports_, context,
                           PeerKey(context->peer(), acceptor_));
}

grpc::ServerUnaryReactor* GrpcService::GetStats(
    grpc::CallbackServerContext* context, const v1::GetStatsRequest*,
    v1::DaemonStats* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!stats_source_) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "this daemon keeps no stats"));
    return reactor;
  }
  ToProto(stats_source_(), response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace stoker::transport
