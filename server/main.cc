// stokerd: the Stoker daemon. Loads datasets and pipelines from a YAML
// config, runs the worker pool and serves batches over gRPC until SIGTERM or
// SIGINT; SIGHUP reloads datasets and pipelines from the same file. Under
// systemd (Type=notify) it reports READY, RELOADING, STOPPING, STATUS and
// watchdog pings; see deploy/systemd/.
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "server/config/config_loader.h"
#include "server/config/config_reference.h"
#include "server/cuda/cuda_probe.h"
#include "server/metrics/log.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "server/server_lib.h"
#include "server/systemd/notifier.h"
#include "server/systemd/status_line.h"

namespace {

using stoker::metrics::Log;
using stoker::metrics::LogLevel;

#ifndef STOKER_VERSION
#error "STOKER_VERSION is set by server/CMakeLists.txt"
#endif

// The text of --version: this build's version, the image formats it
// decodes and what it can do with CUDA.
std::string VersionText() {
  return absl::StrCat("stokerd ", STOKER_VERSION, "\nimage formats: ",
                      stoker::pipeline::DescribeImageFormats(), "\nCUDA: ",
                      stoker::cuda::DescribeCuda(stoker::cuda::ProbeCuda()));
}

// Batches and their parts are megabytes each, allocated and freed many
// times a second (a helper's payloads as received, decoded images). glibc
// serves blocks above its mmap threshold with fresh mappings and gives the
// free top of its heaps back to the kernel, so the same memory faults in
// again page by page, which on a virtual machine costs about 10 us a page:
// a node finishing a helper's batches took 40 % fewer page faults and ran
// 17 % faster with these settings (docs/performance.md). Blocks up to 32 MiB
// (glibc's largest threshold) come from the heaps, which keep up to 256 MiB
// free for reuse. Left alone when GLIBC_TUNABLES sets malloc tunables.
void KeepFreedMemory() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) {
    return;
  }
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "stokerd: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "stokerd: serves ready batches of packed datasets to trainers on this "
      "node over gRPC.\nSignals: SIGTERM/SIGINT stop (streams end with "
      "UNAVAILABLE and clients resume), SIGHUP reloads datasets and "
      "pipelines from the config file."};
  std::string config_path;
  bool check_only = false;
  bool print_reference = false;
  std::string log_level = "info";
  app.add_option("--config,-c", config_path,
                 "YAML config file: listeners, workers, memory budget, "
                 "datasets and pipelines (see --help-config)");
  app.add_flag("--check-config", check_only,
               "Load and check the config (datasets opened, pipelines built), "
               "print a summary and exit: 0 if valid, 1 with every mistake");
  app.add_flag("--help-config", print_reference,
               "Print the reference of every config key and exit");
  app.add_option("--log-level", log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  app.set_version_flag("--version", VersionText,
                       "Print the version and CUDA support (built or not; "
                       "the GPUs seen, or the driver's reason) and exit");
  CLI11_PARSE(app, argc, argv);
  KeepFreedMemory();

  if (print_reference) {
    std::fputs(stoker::config::ConfigReference().c_str(), stdout);
    return 0;
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "stokerd: --config FILE is required\n%s",
                 app.help().c_str());
    return 2;
  }
  stoker::metrics::SetLogLevel(log_level == "debug"     ? LogLevel::kDebug
                               : log_level == "warning" ? LogLevel::kWarning
                               : log_level == "error"   ? LogLevel::kError
                                                        : LogLevel::kInfo);

  // Signals are taken by sigwait below, never by a handler: block them
  // before any thread starts so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Started before the datasets load, so the watchdog is fed while they do.
  // Stopped explicitly below, before the server its status source reads.
  stoker::systemd::Notifier notifier;
  if (!check_only) {
    notifier.Start();
    notifier.Status("loading datasets");
  }

  stoker::StokerServer::KeepGrpcAlive();
  auto options = stoker::config::LoadConfigFile(config_path);
  if (!options.ok()) return Fail(options.status());
  auto server = stoker::StokerServer::Create(*options);
  if (!server.ok()) return Fail(server.status());
  if (check_only) {
    std::printf("%s: valid; %zu datasets, %zu pipelines\n",
                config_path.c_str(), options->datasets.size(),
                options->pipelines.size());
    return 0;
  }
  if (absl::Status s = (*server)->Start(); !s.ok()) return Fail(s);
  stoker::StokerServer* const daemon = server->get();
  notifier.SetStatusSource(
      [daemon, line = stoker::systemd::StatusLine()]() mutable {
        return line.Next(daemon->Stats());
      });
  const auto serving = [](const stoker::config::ServerOptions& o) {
    return absl::StrCat("serving ", o.datasets.size(), " datasets, ",
                        o.pipelines.size(), " pipelines");
  };
  notifier.Ready(serving(*options));

  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGHUP) {
      Log(LogLevel::kInfo, "stopping", {{"signal", strsignal(sig)}});
      break;
    }
    notifier.Reloading();
    auto reloaded = stoker::config::LoadConfigFile(config_path);
    absl::Status s =
        reloaded.ok() ? (*server)->Reload(*reloaded) : reloaded.status();
    if (s.ok()) {
      Log(LogLevel::kInfo, "reloaded", {{"config", config_path}});
      notifier.Ready(absl::StrCat("reloaded; ", serving(*reloaded)));
    } else {
      Log(LogLevel::kError, "reload_refused",
          {{"config", config_path}, {"reason", std::string(s.message())}});
      notifier.Ready(absl::StrCat("reload refused, the previous config stays: ",
                                  s.message()));
    }
  }
  notifier.Stopping("stopping: ending streams");
  (*server)->Stop();
  notifier.Stop();
  Log(LogLevel::kInfo, "stopped");
  return 0;
}
