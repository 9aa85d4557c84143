// stokerd: the Stoker daemon. Loads datasets and pipelines from a YAML
// config (or from --dataset and --pipeline flags), runs the worker pool and
// serves batches over gRPC until SIGTERM or SIGINT, or with --idle-exit
// until it has had no stream for that long; SIGHUP reloads datasets and
// pipelines from the same file. Under
// systemd (Type=notify) it reports READY, RELOADING, STOPPING, STATUS and
// watchdog pings; see deploy/systemd/.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/config/config_loader.h"
#include "server/config/config_reference.h"
#include "server/config/flag_config.h"
#include "server/config/presets.h"
#include "server/cuda/cuda_probe.h"
#include "server/idle_exit.h"
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

// The reference of --help-config: the config keys and ops, then the
// presets of the folder found (or why there is none).
std::string HelpConfig(const std::string& presets) {
  std::string text = stoker::config::ConfigReference();
  const absl::StatusOr<std::string> dir =
      stoker::config::FindPresetsDir(presets);
  absl::StrAppend(&text, "\n",
                  dir.ok() ? stoker::config::PresetReference(*dir)
                           : absl::StrCat("## Pipeline presets\n\nNone: ",
                                          dir.status().message(), "\n"));
  return text;
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
  stoker::config::ConfigFlags flags;
  stoker::config::LoadOptions load;
  double idle_exit_seconds = 0;
  std::string idle_lease;
  CLI::Option* config_option = app.add_option(
      "--config,-c", config_path,
      "YAML config file: listeners, workers, memory budget, datasets and "
      "pipelines (see --help-config)");
  app.add_option("--dataset", flags.datasets,
                 "Without --config: serve the packed dataset at PATH as NAME "
                 "(NAME=PATH; repeat for more)")
      ->excludes(config_option);
  app.add_option("--pipeline", flags.pipelines,
                 "Without --config: serve the pipeline preset PRESET as NAME "
                 "(NAME=PRESET, or PRESET for both; repeat for more)")
      ->excludes(config_option);
  app.add_option("--listen", flags.listen,
                 "Without --config: unix:PATH or HOST:PORT (loopback) to "
                 "listen on; default unix:/run/stoker/stoker.sock")
      ->excludes(config_option);
  app.add_option("--presets", load.presets_dir,
                 "Folder of the pipeline presets (default: $STOKER_PRESETS, "
                 "else share/stoker/presets of the install, else the source "
                 "tree's config/presets)");
  app.add_option("--idle-exit", idle_exit_seconds,
                 "Exit (as on SIGTERM) once no stream has been open for this "
                 "many seconds, counted from the start or the last stream's "
                 "end; 0 (default): never")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-lease", idle_lease,
                 "With --idle-exit: clients hold a shared flock on FILE while "
                 "they need the daemon; it is idle only once none does (the "
                 "Python Loader's private stokerd)");
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
    std::fputs(HelpConfig(load.presets_dir).c_str(), stdout);
    return 0;
  }
  const bool from_flags = config_path.empty();
  if (from_flags && flags.datasets.empty() && flags.pipelines.empty()) {
    std::fprintf(stderr,
                 "stokerd: --config FILE, or --dataset NAME=PATH and "
                 "--pipeline NAME=PRESET, is required\n%s",
                 app.help().c_str());
    return 2;
  }
  const absl::StatusOr<std::string> flag_yaml =
      from_flags ? stoker::config::ConfigFromFlags(flags) : std::string();
  if (!flag_yaml.ok()) return Fail(flag_yaml.status());
  const std::string source = from_flags ? "command line" : config_path;
  // Loads the config anew: at the start and on each SIGHUP.
  const auto load_config = [&] {
    return from_flags
               ? stoker::config::LoadConfigString(*flag_yaml, source, load)
               : stoker::config::LoadConfigFile(config_path, load);
  };
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
  auto options = load_config();
  if (!options.ok()) return Fail(options.status());
  auto server = stoker::StokerServer::Create(*options);
  if (!server.ok()) return Fail(server.status());
  if (check_only) {
    std::printf("%s: valid; %zu datasets, %zu pipelines\n",
                source.c_str(), options->datasets.size(),
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
  // Stopped before the server whose streams it counts.
  std::unique_ptr<stoker::IdleExit> idle_exit;
  if (idle_exit_seconds > 0) {
    idle_exit = std::make_unique<stoker::IdleExit>(
        absl::Seconds(idle_exit_seconds),
        [daemon] { return daemon->stream_service()->Snapshot().size(); },
        [idle_exit_seconds, &idle_lease] {
          if (!idle_lease.empty() && !stoker::TakeIdleLease(idle_lease)) {
            return false;
          }
          Log(LogLevel::kInfo, "idle_exit",
              {{"seconds", absl::StrCat(idle_exit_seconds)}});
          kill(getpid(), SIGTERM);
          return true;
        });
    idle_exit->Start();
  }

  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGHUP) {
      Log(LogLevel::kInfo, "stopping", {{"signal", strsignal(sig)}});
      break;
    }
    notifier.Reloading();
    auto reloaded = load_config();
    absl::Status s =
        reloaded.ok() ? (*server)->Reload(*reloaded) : reloaded.status();
    if (s.ok()) {
      Log(LogLevel::kInfo, "reloaded", {{"config", source}});
      notifier.Ready(absl::StrCat("reloaded; ", serving(*reloaded)));
    } else {
      Log(LogLevel::kError, "reload_refused",
          {{"config", source}, {"reason", std::string(s.message())}});
      notifier.Ready(absl::StrCat("reload refused, the previous config stays: ",
                                  s.message()));
    }
  }
  if (idle_exit != nullptr) idle_exit->Stop();
  notifier.Stopping("stopping: ending streams");
  (*server)->Stop();
  notifier.Stop();
  Log(LogLevel::kInfo, "stopped");
  return 0;
}
