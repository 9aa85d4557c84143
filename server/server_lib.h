// StokerServer: the composition root of stokerd. Owns the worker pool, the
// catalog of datasets and pipelines, the stream service and the gRPC server,
// and wires them together. Nothing else sees all of them.
//
// Lifecycle: Create() loads everything the config names (and fails with the
// dataset, pipeline or TLS file at fault); Start() binds the listeners; Stop()
// ends every stream with UNAVAILABLE (clients resume at their position), shuts
// the gRPC server down and drains the pool. Stop() is idempotent and the
// destructor calls it.
//
// Thread-safe.
#ifndef STOKER_SERVER_SERVER_LIB_H_
#define STOKER_SERVER_SERVER_LIB_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/config/options.h"
#include "server/metrics/daemon_stats.h"
#include "server/metrics/metrics_exposer.h"
#include "server/metrics/storage_probe.h"
#include "server/metrics/stream_log.h"
#include "server/pipeline/worker_pool.h"
#include "server/remote/helper_pool.h"
#include "server/service/autotune_thread.h"
#include "server/service/catalog.h"
#include "server/service/opener.h"
#include "server/staging/staged_datasets.h"
#include "server/service/stream_service.h"
#include "server/rpc/grpc_service.h"
#include "server/transport/transport.h"

namespace stoker {

class StokerServer {
 public:
  // gRPC tears its library down when its last user goes, which can block
  // for seconds on an idle poller. A daemon or a test that starts servers
  // calls this once to keep the library up until the process exits.
  static void KeepGrpcAlive();

  // `storage_probe` replaces how datasets' storage is checked (tests).
  static absl::StatusOr<std::unique_ptr<StokerServer>> Create(
      config::ServerOptions options,
      metrics::StorageProbeOptions storage_probe = {});
  ~StokerServer();

  absl::Status Start();
  void Stop();

  // Loads a new catalog from `options` (datasets and pipelines only; the
  // listeners and the pool keep their settings). On error the old catalog
  // stays in force. Running streams keep the catalog they opened with.
  absl::Status Reload(const config::ServerOptions& options);

  // The gRPC target of the unix socket ("unix:/path"), or empty.
  std::string unix_target() const;
  // The bound TCP port (the real one when the config asked for port 0), or 0.
  int tcp_port() const;

  service::StreamService* stream_service() { return service_.get(); }

  // The bound port of the /metrics endpoint, or 0 when metrics are off.
  int metrics_port() const;
  // A snapshot of every counter: what /metrics and GetStats render.
  metrics::DaemonStats Stats() const;
  // Each dataset with a `source`: its staging (server_staging.cc).
  std::vector<staging::StageStatus> StagingStats() const;
  // Each helper of the config `helpers`, in config order; empty without.
  std::vector<service::HelperStats> HelperStats() const;

 private:
  StokerServer(config::ServerOptions options,
               metrics::StorageProbeOptions storage_probe);

  // Staging (server_staging.cc). Makes staged_ for the datasets of
  // `options` with a source; their copies begin in Start().
  absl::Status CreateStaging(const config::ServerOptions& options);
  // Makes staged_ follow a reloaded config.
  absl::Status UpdateStaging(const config::ServerOptions& options);
  // service::StagingLookup over staged_.
  absl::Status StagingLookup(const std::string& dataset) const;
  // staged_'s callbacks: a dataset became servable, or was evicted.
  void AddServable(const std::string& name,
                   std::shared_ptr<const dataset::Dataset> ds);
  void RemoveEvicted(const std::string& name);

  const config::ServerOptions options_;
  const metrics::StorageProbeOptions storage_probe_;
  const std::chrono::steady_clock::time_point started_;
  const absl::Time start_time_;
  // Logs streams opening and closing. Declared before the pool and the
  // service so that it outlives every stream.
  metrics::StreamLog stream_log_;
  std::unique_ptr<pipeline::WorkerPool> pool_;
  // Null without `helpers` in the config. Outlives the service's streams,
  // which place chunks on it.
  std::unique_ptr<remote::HelperPool> helpers_;
  // The default prefetch depth the autotuner picks (prefetch: auto); read
  // by the service at each open.
  std::atomic<uint32_t> tuned_prefetch_{0};
  std::unique_ptr<service::StreamService> service_;
  // Stages the datasets with a `source`; null until CreateStaging. Its
  // callbacks use service_, which it must not outlive.
  std::unique_ptr<staging::StagedDatasets> staged_;
  // Serializes the catalog changes: a reload, and a staged dataset added
  // or evicted.
  absl::Mutex catalog_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Runs every stream open, and parks those that wait for admission.
  std::unique_ptr<service::Opener> opener_;
  // Set when workers or prefetch is auto; stopped before the pool.
  std::unique_ptr<service::AutotuneThread> autotune_;
  // Every registered transport (transport.h), one of each.
  std::unique_ptr<transport::Transports> transports_;
  std::unique_ptr<transport::GrpcService> grpc_service_;
  std::unique_ptr<transport::UnixAcceptor> unix_acceptor_;
  std::unique_ptr<grpc::Server> server_;
  // Plaintext, or TLS from listen.tls_*; the PEM files are read in Create().
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials_;
  int tcp_port_ = 0;
  // Serves /metrics; set in Start() when the config turns metrics on.
  std::unique_ptr<metrics::MetricsExposer> exposer_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Where each dataset of the catalog in force lives.
  std::vector<metrics::DatasetStorage> storage_ ABSL_GUARDED_BY(mu_);
};

// Builds the catalog the config names: opens each dataset, creates each
// pipeline. Errors name the dataset or pipeline and its config line. A
// dataset with a `source` is taken from `staged` (those servable), or left
// out while it is being staged.
absl::StatusOr<std::shared_ptr<const service::Catalog>> BuildCatalog(
    const config::ServerOptions& options,
    const std::map<std::string, std::shared_ptr<const dataset::Dataset>>&
        staged = {});

}  // namespace stoker

#endif  // STOKER_SERVER_SERVER_LIB_H_
