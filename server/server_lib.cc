#include "server/server_lib.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <grp.h>

#include <cerrno>
#include <cstring>

#include <grpc/grpc.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "server/metrics/log.h"

namespace stoker {
namespace {

using metrics::Log;
using metrics::LogLevel;

// A unix socket path left by a daemon that died is removed; one that a live
// daemon answers on is an error, so two daemons never share a socket.
absl::Status ClearStaleSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (live) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another daemon is listening on ", path, "; stop it first"));
  }
  unlink(path.c_str());
  return absl::OkStatus();
}

absl::Status SetSocketAccess(const config::ListenOptions& listen) {
  if (!listen.unix_group.empty()) {
    struct group* g = getgrnam(listen.unix_group.c_str());
    if (g == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen.unix_group '", listen.unix_group,
                       "' is not a group on this machine"));
    }
    if (chown(listen.unix_path.c_str(), static_cast<uid_t>(-1), g->gr_gid) !=
        0) {
      return absl::PermissionDeniedError(
          absl::StrCat("chown ", listen.unix_path, ": ", strerror(errno)));
    }
  }
  if (chmod(listen.unix_path.c_str(), listen.unix_mode) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("chmod ", listen.unix_path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const service::Catalog>> BuildCatalog(
    const config::ServerOptions& options) {
  std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets;
  for (const config::DatasetOptions& d : options.datasets) {
    auto ds = dataset::Dataset::Open(d.name, d.path);
    if (!ds.ok()) {
      return absl::Status(ds.status().code(),
                          absl::StrCat(options.source, ":", d.line,
                                       ": dataset '", d.name, "' at ", d.path,
                                       ": ", ds.status().message()));
    }
    datasets[d.name] = *std::move(ds);
  }
  std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines;
  for (const config::PipelineOptions& p : options.pipelines) {
    auto pipe = pipeline::Pipeline::Create(p.name, p.ops);
    if (!pipe.ok()) {
      return absl::Status(pipe.status().code(),
                          absl::StrCat(options.source, ":", p.line,
                                       ": pipeline '", p.name,
                                       "': ", pipe.status().message()));
    }
    pipelines[p.name] = *std::move(pipe);
  }
  return std::make_shared<const service::Catalog>(std::move(datasets),
                                                  std::move(pipelines));
}

void StokerServer::KeepGrpcAlive() {
  static const bool kept = [] {
    grpc_init();  // Deliberately never matched by grpc_shutdown().
    return true;
  }();
  (void)kept;
}

StokerServer::StokerServer(config::ServerOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<StokerServer>> StokerServer::Create(
    config::ServerOptions options) {
  if (options.metrics.enabled) {
    return absl::UnimplementedError(absl::StrCat(
        options.source,
        ": metrics: this version of stokerd has no Prometheus endpoint yet; "
        "remove the metrics key or set `metrics: off`"));
  }
  auto catalog = BuildCatalog(options);
  if (!catalog.ok()) return catalog.status();
  std::unique_ptr<StokerServer> server(new StokerServer(std::move(options)));
  const config::ServerOptions& o = server->options_;
  server->pool_ = std::make_unique<pipeline::WorkerPool>(o.workers);
  service::ServiceOptions so;
  so.max_batch_size = o.limits.max_batch_size;
  so.max_prefetch = o.limits.max_prefetch;
  so.default_prefetch = o.limits.default_prefetch;
  so.max_streams = o.limits.max_streams;
  so.max_batch_bytes = o.limits.max_batch_bytes;
  so.memory_budget = o.memory_budget;
  so.on_corrupt = o.on_corrupt == config::OnCorrupt::kFail
                      ? service::OnCorrupt::kFail
                      : service::OnCorrupt::kSkip;
  server->service_ = std::make_unique<service::StreamService>(
      server->pool_.get(), so, *std::move(catalog));
  server->grpc_service_ =
      std::make_unique<transport::GrpcService>(server->service_.get());
  return server;
}

StokerServer::~StokerServer() { Stop(); }

absl::Status StokerServer::Start() {
  pool_->Start();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const config::ListenOptions& listen = options_.listen;
  if (!listen.unix_path.empty()) {
    if (absl::Status s = ClearStaleSocket(listen.unix_path); !s.ok()) return s;
    builder.AddListeningPort("unix:" + listen.unix_path,
                             grpc::InsecureServerCredentials());
  }
  if (!listen.tcp.empty()) {
    builder.AddListeningPort(listen.tcp, grpc::InsecureServerCredentials(),
                             &tcp_port_);
  }
  builder.RegisterService(grpc_service_.get());
  // Batches are large; the default 4 MiB limit would refuse them.
  builder.SetMaxSendMessageSize(-1);
  builder.SetMaxReceiveMessageSize(16 << 20);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || (!listen.tcp.empty() && tcp_port_ == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ",
        listen.unix_path.empty() ? "" : "unix:" + listen.unix_path, " ",
        listen.tcp, ": in use, or no permission"));
  }
  if (!listen.unix_path.empty()) {
    if (absl::Status s = SetSocketAccess(listen); !s.ok()) return s;
  }
  Log(LogLevel::kInfo, "listening",
      {{"unix", listen.unix_path},
       {"tcp", listen.tcp.empty() ? "" : absl::StrCat(tcp_port_)},
       {"workers", absl::StrCat(pool_->num_threads())},
       {"datasets", absl::StrCat(options_.datasets.size())},
       {"pipelines", absl::StrCat(options_.pipelines.size())}});
  return absl::OkStatus();
}

void StokerServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (service_ != nullptr) service_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    server_->Wait();
    server_.reset();
  }
  if (pool_ != nullptr) pool_->Stop();
  if (!options_.listen.unix_path.empty()) {
    unlink(options_.listen.unix_path.c_str());
  }
}

absl::Status StokerServer::Reload(const config::ServerOptions& options) {
  auto catalog = BuildCatalog(options);
  if (!catalog.ok()) return catalog.status();
  service_->SetCatalog(*std::move(catalog));
  return absl::OkStatus();
}

std::string StokerServer::unix_target() const {
  return options_.listen.unix_path.empty()
             ? ""
             : "unix:" + options_.listen.unix_path;
}

int StokerServer::tcp_port() const { return tcp_port_; }

}  // namespace stoker
