#include "server/server_lib.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <grp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include <grpc/grpc.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"
#include "server/cuda/cuda_probe.h"
#include "server/metrics/log.h"
#include "server/metrics/stream_log.h"
#include "stoker/v1/stoker.grpc.pb.h"

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
  // The peer of a connected unix socket is the process that listens.
  ucred holder{};
  socklen_t len = sizeof(holder);
  const bool known =
      live && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &holder, &len) == 0 &&
      holder.pid > 0;
  close(fd);
  if (live) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another daemon is listening on ", path,
        known ? absl::StrCat(" (pid ", holder.pid, ")") : "",
        "; stop it first, or give this one another listen.unix"));
  }
  unlink(path.c_str());
  return absl::OkStatus();
}

// The gid of listen.unix_group, or -1 when none is set or it is unknown.
int64_t SocketGroup(const config::ListenOptions& listen) {
  if (listen.unix_group.empty()) return -1;
  struct group* g = getgrnam(listen.unix_group.c_str());
  return g == nullptr ? -1 : static_cast<int64_t>(g->gr_gid);
}

absl::Status SetSocketAccess(const config::ListenOptions& listen) {
  if (!listen.unix_group.empty()) {
    const int64_t gid = SocketGroup(listen);
    if (gid < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen.unix_group '", listen.unix_group,
                       "' is not a group on this machine"));
    }
    if (chown(listen.unix_path.c_str(), static_cast<uid_t>(-1),
              static_cast<gid_t>(gid)) != 0) {
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

// Reads a PEM file named by the config key `key`; the error names both.
absl::StatusOr<std::string> ReadPem(absl::string_view key,
                                    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, ": cannot read '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": '", path, "' is not a PEM file (no -----BEGIN)"));
  }
  return text.str();
}

// The credentials of the TCP listener: TLS when the config names a
// certificate (mutual TLS with a client CA), else plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const config::ListenOptions& listen) {
  if (listen.tls_cert.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadPem("listen.tls.cert", listen.tls_cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("listen.tls.key", listen.tls_key);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  if (!listen.tls_client_ca.empty()) {
    auto ca = ReadPem("listen.tls.client_ca", listen.tls_client_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// Checks where each dataset lives and logs a warning, with the remedy, for
// one on a network filesystem or a spinning disk.
std::vector<metrics::DatasetStorage> ProbeStorage(
    const config::ServerOptions& options,
    const metrics::StorageProbeOptions& probe) {
  std::vector<metrics::DatasetStorage> out;
  for (const config::DatasetOptions& d : options.datasets) {
    // A dataset being staged is probed once it is on local disk.
    if (!d.source.empty()) continue;
    absl::StatusOr<metrics::StorageDiagnosis> diagnosis =
        metrics::DiagnoseStorage(d.name, d.path, probe);
    if (!diagnosis.ok()) {
      Log(LogLevel::kWarning, "storage_probe_failed",
          {{"dataset", d.name},
           {"error", std::string(diagnosis.status().message())}});
      continue;
    }
    metrics::LogStorage(d.name, d.path, *diagnosis);
    out.push_back({d.name, d.path, *std::move(diagnosis)});
  }
  return out;
}

}  // namespace

void StokerServer::KeepGrpcAlive() {
  static const bool kept = [] {
    grpc_init();  // Deliberately never matched by grpc_shutdown().
    return true;
  }();
  (void)kept;
}

StokerServer::StokerServer(config::ServerOptions options,
                           metrics::StorageProbeOptions storage_probe)
    : options_(std::move(options)),
      storage_probe_(std::move(storage_probe)),
      started_(std::chrono::steady_clock::now()),
      start_time_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<StokerServer>> StokerServer::Create(
    config::ServerOptions options,
    metrics::StorageProbeOptions storage_probe) {
  auto credentials = TcpCredentials(options.listen);
  if (!credentials.ok()) {
    return absl::Status(
        credentials.status().code(),
        absl::StrCat(options.source, ": ", credentials.status().message()));
  }
  if (!options.listen.unix_path.empty()) {
    absl::Status s =
        transport::UnixAcceptor::CheckFolder(options.listen.unix_path);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(options.source, ": ", s.message()));
    }
  }
  auto catalog = BuildCatalog(options);
  if (!catalog.ok()) return catalog.status();
  std::unique_ptr<StokerServer> server(
      new StokerServer(std::move(options), std::move(storage_probe)));
  server->tcp_credentials_ = *std::move(credentials);
  const config::ServerOptions& o = server->options_;
  {
    std::vector<metrics::DatasetStorage> storage =
        ProbeStorage(o, server->storage_probe_);
    absl::MutexLock lock(&server->mu_);
    server->storage_ = std::move(storage);
  }
  server->pool_ = std::make_unique<pipeline::WorkerPool>(o.workers);
  service::ServiceOptions so;
  so.max_batch_size = o.limits.max_batch_size;
  so.max_prefetch = o.limits.max_prefetch;
  so.default_prefetch = o.limits.default_prefetch;
  if (o.prefetch_auto) so.tuned_prefetch = &server->tuned_prefetch_;
  so.max_streams = o.limits.max_streams;
  so.max_streams_per_peer = o.limits.max_streams_per_peer;
  so.admission_wait_seconds = o.limits.admission_wait_seconds;
  so.share_lag_window = o.sharing.lag_window;
  transport::TransportEnv env;
  env.unix_path = o.listen.unix_path;
  env.unix_mode = o.listen.unix_mode;
  env.unix_group = SocketGroup(o.listen);
  env.device_memory_budget = o.device_memory_budget;
  server->transports_ = std::make_unique<transport::Transports>(env);
  // Shared runs build in a transport's run memory (shm's memfd rings, which
  // its clients map): a batch built once reaches every consumer without a
  // copy.
  transport::Transports* const transports = server->transports_.get();
  so.run_memory = [transports](uint32_t count, size_t bytes,
                               std::shared_ptr<void> hold)
      -> absl::StatusOr<std::shared_ptr<service::BufferSource>> {
    auto memory = transports->RunMemory(count, bytes, hold);
    if (!memory.ok() || *memory != nullptr) return memory;
    return std::make_shared<service::HeapBufferSource>(count, bytes,
                                                       std::move(hold));
  };
  so.max_batch_bytes = o.limits.max_batch_bytes;
  so.memory_budget = o.memory_budget;
  if (!o.helpers.addresses.empty() || !o.helpers.dns.empty()) {
    // Local first: the pool has more runnable tasks than workers.
    pipeline::WorkerPool* const pool = server->pool_.get();
    server->helpers_ = std::make_unique<remote::HelperPool>(
        o.helpers, [pool] {
          const pipeline::WorkerPool::Stats s = pool->GetStats();
          return s.queued > static_cast<size_t>(s.active_threads);
        });
    so.placer = server->helpers_.get();
  }
  StokerServer* const self = server.get();
  so.staging = [self](const std::string& name) {
    return self->StagingLookup(name);
  };
  so.on_corrupt = o.on_corrupt == config::OnCorrupt::kFail
                      ? service::OnCorrupt::kFail
                      : service::OnCorrupt::kSkip;
  server->service_ = std::make_unique<service::StreamService>(
      server->pool_.get(), so, *std::move(catalog));
  server->service_->SetJobWeights(o.job_weights);
  if (o.workers == 0 || o.prefetch_auto) {
    service::AutotuneLimits limits;
    limits.tune_workers = o.workers == 0;
    limits.tune_prefetch = o.prefetch_auto;
    limits.max_workers = server->pool_->num_threads();
    limits.initial_workers = server->pool_->num_threads();
    limits.max_prefetch = o.limits.max_prefetch;
    limits.initial_prefetch = o.limits.default_prefetch;
    server->autotune_ = std::make_unique<service::AutotuneThread>(
        limits, server->pool_.get(), server->service_.get(),
        &server->tuned_prefetch_, absl::Milliseconds(500));
  }
  server->opener_ = std::make_unique<service::Opener>(server->service_.get());
  server->grpc_service_ = std::make_unique<transport::GrpcService>(
      server->service_.get(), server->opener_.get(), server->transports_.get());
  server->service_->SetObserver(&server->stream_log_);
  server->grpc_service_->SetStatsSource([self] { return self->Stats(); });
  if (absl::Status s = server->CreateStaging(o); !s.ok()) return s;
  return server;
}

StokerServer::~StokerServer() { Stop(); }

absl::Status StokerServer::Start() {
  // What the GPU transport will be able to serve, stated before anything
  // listens: whether CUDA support is built, and the GPUs seen or the
  // driver's reason.
  const cuda::CudaProbe& gpu = cuda::ProbeCuda();
  Log(LogLevel::kInfo, "cuda",
      {{"built", gpu.built ? "yes" : "no"},
       {"gpus", absl::StrCat(gpu.gpus.size())},
       {"detail", cuda::DescribeCuda(gpu)}});
  if (helpers_ != nullptr) {
    // The helpers' TLS files are read at every connect; a bad one is the
    // config's mistake, said before the daemon starts.
    const config::HelperOptions& h = options_.helpers;
    for (const auto& [key, path] :
         {std::pair{"helpers.tls.ca", &h.tls_ca},
          {"helpers.tls.cert", &h.tls_cert},
          {"helpers.tls.key", &h.tls_key}}) {
      if (path->empty()) continue;
      if (absl::StatusOr<std::string> pem = ReadPem(key, *path); !pem.ok()) {
        return pem.status();
      }
    }
  }
  pool_->Start();
  if (helpers_ != nullptr) helpers_->Start();
  if (staged_ != nullptr) staged_->Start();
  opener_->Start();
  if (autotune_ != nullptr) autotune_->Start();
  if (options_.metrics.enabled) {
    auto exposer = metrics::MetricsExposer::Start(
        options_.metrics.listen, [this] { return Stats(); });
    if (!exposer.ok()) return exposer.status();
    exposer_ = *std::move(exposer);
    Log(LogLevel::kInfo, "metrics_listening",
        {{"address", options_.metrics.listen},
         {"port", absl::StrCat(exposer_->port())},
         {"path", "/metrics"}});
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const config::ListenOptions& listen = options_.listen;
  if (!listen.unix_path.empty()) {
    // Accepted here, not by gRPC, so that each stream knows its peer's uid.
    if (absl::Status s = ClearStaleSocket(listen.unix_path); !s.ok()) return s;
    auto acceptor = transport::UnixAcceptor::Bind(listen.unix_path);
    if (!acceptor.ok()) return acceptor.status();
    unix_acceptor_ = *std::move(acceptor);
    grpc_service_->SetUnixAcceptor(unix_acceptor_.get());
  }
  if (!listen.tcp.empty()) {
    builder.AddListeningPort(listen.tcp, tcp_credentials_, &tcp_port_);
    if (listen.tls_cert.empty() && listen.insecure_remote) {
      Log(LogLevel::kWarning, "insecure_remote_listener",
          {{"tcp", listen.tcp},
           {"reason",
            "listen.insecure_remote is set: plaintext gRPC without client "
            "authentication is open to the network; use listen.tls"}});
    }
  }
  if (absl::Status s = transports_->Start(); !s.ok()) return s;
  builder.RegisterService(grpc_service_.get());
  // Batches are large; the default 4 MiB limit would refuse them.
  builder.SetMaxSendMessageSize(-1);
  builder.SetMaxReceiveMessageSize(16 << 20);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || (!listen.tcp.empty() && tcp_port_ == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ",
        listen.unix_path.empty() ? "" : "unix:" + listen.unix_path, " ",
        listen.tcp, ": in use, or no permission",
        listen.tls_cert.empty()
            ? ""
            : absl::StrCat(", or listen.tls.key ", listen.tls_key,
                           " does not belong to listen.tls.cert ",
                           listen.tls_cert)));
  }
  // The standard health service answers "" (the server) and, for clients
  // and probes that name the service they use, the Stoker service.
  if (grpc::HealthCheckServiceInterface* health =
          server_->GetHealthCheckService();
      health != nullptr) {
    health->SetServingStatus(v1::Stoker::service_full_name(), true);
  }
  if (!listen.unix_path.empty()) {
    // Owner and mode first: nobody can connect before Start listens.
    if (absl::Status s = SetSocketAccess(listen); !s.ok()) return s;
    if (absl::Status s = unix_acceptor_->Start(server_.get()); !s.ok()) {
      return s;
    }
  }
  Log(LogLevel::kInfo, "listening",
      {{"unix", listen.unix_path},
       {"tcp", listen.tcp.empty() ? "" : absl::StrCat(tcp_port_)},
       {"tls", listen.tls_cert.empty()        ? "off"
               : listen.tls_client_ca.empty() ? "on"
                                              : "mutual"},
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
  // First, so that no scrape reads a daemon being taken apart.
  if (exposer_ != nullptr) exposer_->Stop();
  // Stops the copies at their next chunk; what is published stays.
  if (staged_ != nullptr) staged_->Stop();
  if (service_ != nullptr) service_->Shutdown();
  // Cancels the chunks on helpers: their batches are built here, or fail
  // with their streams.
  if (helpers_ != nullptr) helpers_->Stop();
  if (unix_acceptor_ != nullptr) unix_acceptor_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    server_->Wait();
    server_.reset();
  }
  // After the server: a call still being opened holds its reactor until
  // the opener answers it (service_->Shutdown made those answers quick).
  if (opener_ != nullptr) opener_->Stop();
  if (transports_ != nullptr) transports_->Stop();
  if (autotune_ != nullptr) autotune_->Stop();
  if (pool_ != nullptr) pool_->Stop();
  // Only a socket this daemon bound: after --check-config, or a start
  // refused because another daemon holds the path, the file is that one's.
  if (unix_acceptor_ != nullptr) unlink(options_.listen.unix_path.c_str());
}

absl::Status StokerServer::Reload(const config::ServerOptions& options) {
  // Copies under way whose dataset is unchanged go on. Not under
  // catalog_mu_: a stager being stopped may be adding its dataset.
  if (absl::Status s = UpdateStaging(options); !s.ok()) return s;
  absl::MutexLock catalog_lock(&catalog_mu_);
  auto catalog = BuildCatalog(options, staged_->Servable());
  if (!catalog.ok()) return catalog.status();
  const config::ListenOptions& a = options_.listen;
  const config::ListenOptions& b = options.listen;
  if (std::tie(a.unix_path, a.tcp, a.unix_mode, a.unix_group, a.tls_cert,
               a.tls_key, a.tls_client_ca, a.insecure_remote) !=
      std::tie(b.unix_path, b.tcp, b.unix_mode, b.unix_group, b.tls_cert,
               b.tls_key, b.tls_client_ca, b.insecure_remote)) {
    Log(LogLevel::kWarning, "listen_unchanged",
        {{"reason",
          "a reload swaps datasets and pipelines only; the changed listen "
          "settings take effect at the next start"}});
  }
  std::vector<metrics::DatasetStorage> storage =
      ProbeStorage(options, storage_probe_);
  service_->SetCatalog(*std::move(catalog));
  service_->SetJobWeights(options.job_weights);
  absl::MutexLock lock(&mu_);
  storage_ = std::move(storage);
  return absl::OkStatus();
}

std::string StokerServer::unix_target() const {
  return options_.listen.unix_path.empty()
             ? ""
             : "unix:" + options_.listen.unix_path;
}

int StokerServer::tcp_port() const { return tcp_port_; }

int StokerServer::metrics_port() const {
  return exposer_ == nullptr ? 0 : exposer_->port();
}

metrics::DaemonStats StokerServer::Stats() const {
  metrics::DaemonStats s;
  s.uptime_seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - started_)
                         .count();
  s.start_time_seconds = absl::ToDoubleSeconds(start_time_ - absl::UnixEpoch());
  s.service = service_->GetStats();
  s.streams = service_->Snapshot();
  s.labels = metrics::ReadLabelStats(*service_);
  s.errors = service_->Errors();
  s.pool = pool_->GetStats();
  if (autotune_ != nullptr) s.autotune = autotune_->state();
  s.transport_counts = transports_->Counters();
  if (helpers_ != nullptr) {
    s.helpers = helpers_->Stats();
    s.placing_remote = helpers_->placing();
  }
  s.staging = StagingStats();
  absl::MutexLock lock(&mu_);
  s.storage = storage_;
  return s;
}

std::vector<service::HelperStats> StokerServer::HelperStats() const {
  if (helpers_ == nullptr) return {};
  return helpers_->Stats();
}

}  // namespace stoker
