#include "stoker/client.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "stream_call.h"
#include "stoker/v1/stoker.grpc.pb.h"

namespace stoker {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

namespace {

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // Reconnect quickly after a daemon restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

// The contents of the PEM file `path` (named `what` in errors), or "" for
// an empty path.
absl::StatusOr<std::string> ReadPemFile(const char* what,
                                        const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read the TLS ", what, " '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the TLS ", what, " '", path, "' is not a PEM file (no -----BEGIN)"));
  }
  return text.str();
}

}  // namespace

std::unique_ptr<Client> Client::Connect(const std::string& target) {
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), ChannelArgs());
  impl->stub = v1::Stoker::NewStub(impl->channel);
  impl->messages = std::make_shared<MessagePool>();
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& target, const TlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs its key and the key its certificate; "
        "got only one of them");
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [what, path, out] :
       {std::tuple("CA", &tls.ca_file, &ssl.pem_root_certs),
        std::tuple("client certificate", &tls.cert_file, &ssl.pem_cert_chain),
        std::tuple("client key", &tls.key_file, &ssl.pem_private_key)}) {
    absl::StatusOr<std::string> pem = ReadPemFile(what, *path);
    if (!pem.ok()) return pem.status();
    *out = *std::move(pem);
  }
  grpc::ChannelArguments args = ChannelArgs();
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->channel =
      grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
  impl->stub = v1::Stoker::NewStub(impl->channel);
  impl->messages = std::make_shared<MessagePool>();
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<std::vector<DatasetSummary>> Client::ListDatasets(
    std::chrono::milliseconds timeout) {
  grpc::ClientContext context;
  if (timeout.count() > 0) {
    context.set_deadline(std::chrono::system_clock::now() + timeout);
  }
  v1::ListDatasetsResponse response;
  grpc::Status s =
      impl_->stub->ListDatasets(&context, v1::ListDatasetsRequest(), &response);
  if (!s.ok()) return FromGrpc(s);
  std::vector<DatasetSummary> out;
  for (const v1::DatasetInfo& d : response.datasets()) {
    out.push_back({d.name(),
                   d.num_samples(),
                   d.num_shards(),
                   d.bytes(),
                   {d.classes().begin(), d.classes().end()},
                   d.manifest_digest(),
                   d.content_digest(),
                   d.staging()});
  }
  return out;
}

absl::StatusOr<std::vector<PipelineSummary>> Client::ListPipelines() {
  grpc::ClientContext context;
  v1::ListPipelinesResponse response;
  grpc::Status s = impl_->stub->ListPipelines(
      &context, v1::ListPipelinesRequest(), &response);
  if (!s.ok()) return FromGrpc(s);
  std::vector<PipelineSummary> out;
  for (const v1::PipelineInfo& p : response.pipelines()) {
    out.push_back({p.name(), {p.ops().begin(), p.ops().end()}});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Stream>> Client::OpenStream(
    const StreamOptions& options) {
  std::unique_ptr<Stream> stream = NewStream(options);
  if (absl::Status s = stream->Start(); !s.ok()) return s;
  return stream;
}

std::unique_ptr<Stream> Client::NewStream(const StreamOptions& options) {
  return std::unique_ptr<Stream>(new Stream(this, options));
}

absl::Status Client::GetStats(v1::DaemonStats* stats) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::Status s =
      impl_->stub->GetStats(&context, v1::GetStatsRequest(), stats);
  if (!s.ok()) return FromGrpc(s);
  return absl::OkStatus();
}

}  // namespace stoker
