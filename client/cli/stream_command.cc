#include "client/cli/stream_command.h"

#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "client/cli/connect_flags.h"
#include "nlohmann/json.hpp"
#include "stoker/client.h"

namespace stoker::cli {
namespace {

struct StreamFlags {
  ConnectFlags connect;
  StreamOptions options;
  std::string indices_out;
  uint64_t max_batches = 0;
  int step_ms = 0;
  bool json = false;
  bool quiet = false;
  double open_timeout_s = 30;
  double reconnect_timeout_s = 30;
  std::string compression = "none";
};

int RunStream(const StreamFlags& flags) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<Client>> client =
      ConnectFromFlags(flags.connect);
  if (!client.ok()) {
    std::fprintf(stderr, "stoker stream: %s\n",
                 client.status().ToString().c_str());
    return 1;
  }
  StreamOptions options = flags.options;
  options.open_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(flags.open_timeout_s * 1000));
  options.reconnect_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(flags.reconnect_timeout_s * 1000));
  options.compression = flags.compression == "zstd"   ? Compression::kZstd
                        : flags.compression == "auto" ? Compression::kAuto
                                                      : Compression::kNone;
  if (!flags.quiet) {
    const std::string address = flags.connect.address;
    const std::string dataset = options.dataset;
    options.on_staging = [address, dataset](const std::string& progress) {
      std::fprintf(stderr,
                   "stoker stream: waiting for dataset '%s': stokerd at %s "
                   "is staging it onto local disk: %s\n",
                   dataset.c_str(), address.c_str(), progress.c_str());
    };
  }
  auto stream = (*client)->OpenStream(options);
  if (!stream.ok()) {
    std::fprintf(stderr, "stoker stream: %s\n",
                 stream.status().ToString().c_str());
    return 1;
  }
  std::ofstream indices;
  if (!flags.indices_out.empty()) {
    indices.open(flags.indices_out);
    if (!indices) {
      std::fprintf(stderr, "stoker stream: cannot write %s\n",
                   flags.indices_out.c_str());
      return 1;
    }
  }
  XXH3_state_t* digest = XXH3_createState();
  XXH3_64bits_reset(digest);
  uint64_t samples = 0, batches = 0, skipped = 0, bytes = 0, shared = 0;
  uint64_t wire_bytes = 0;
  double first_batch_seconds = 0;
  uint64_t first_batch_samples = 0;
  Clock::time_point last_report = start;
  Batch batch;
  absl::Status status;
  while (flags.max_batches == 0 || batches < flags.max_batches) {
    status = (*stream)->Next(&batch);
    if (!status.ok()) break;
    if (batches == 0) {
      first_batch_seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      first_batch_samples = batch.sample_ids().size();
    }
    ++batches;
    samples += batch.sample_ids().size();
    skipped += batch.skipped_ids().size();
    shared += batch.shared() ? 1 : 0;
    wire_bytes += batch.wire_bytes();
    for (const TensorView& t : batch.tensors()) {
      // Device memory (cuda_ipc) is not hashed: this tool does not run CUDA.
      if (t.device < 0) XXH3_64bits_update(digest, t.data, t.size);
      bytes += t.size;
    }
    if (indices) {
      const std::vector<uint64_t>& ids = batch.sample_ids();
      const std::vector<uint32_t>& reps = batch.sample_reps();
      for (size_t i = 0; i < ids.size(); ++i) {
        indices << ids[i];
        if (!reps.empty()) indices << ' ' << reps[i];
        indices << '\n';
      }
      // Flushed per batch: the file of a client killed mid-stream still
      // lists every sample it received.
      indices.flush();
    }
    if (flags.step_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(flags.step_ms));
    }
    const Clock::time_point now = Clock::now();
    if (!flags.quiet && now - last_report > std::chrono::seconds(1)) {
      const double s = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "\r%llu batches, %llu samples, %.0f samples/s",
                   (unsigned long long)batches, (unsigned long long)samples,
                   samples / s);
      last_report = now;
    }
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  const uint64_t hash = XXH3_64bits_digest(digest);
  XXH3_freeState(digest);
  if (!flags.quiet && last_report != start) std::fputc('\n', stderr);
  const bool ended = status.ok() || absl::IsOutOfRange(status);
  if (!ended) {
    std::fprintf(stderr, "stoker stream: %s\n", status.ToString().c_str());
  }
  const Position next = (*stream)->position();
  if (flags.json) {
    nlohmann::json out = {
        {"samples", samples},
        {"batches", batches},
        {"skipped_samples", skipped},
        {"shared_batches", shared},
        {"bytes", bytes},
        // What crossed the wire in the messages (grpc; compressed where the
        // stream asked): 0 over shm.
        {"wire_bytes", wire_bytes},
        {"seconds", seconds},
        {"samples_per_second", seconds > 0 ? samples / seconds : 0.0},
        {"first_batch_seconds", first_batch_seconds},
        // The rate after the first batch: the pipeline's steady state.
        {"steady_samples_per_second",
         batches > 1 && seconds > first_batch_seconds
             ? (samples - first_batch_samples) / (seconds - first_batch_seconds)
             : 0.0},
        {"content_digest", absl::StrFormat("%016x", hash)},
        {"next_position", {{"epoch", next.epoch}, {"step", next.step}}},
        {"reconnects", (*stream)->reconnects()},
        {"transport", (*stream)->info().transport},
        {"notice_socket", (*stream)->info().notice_socket},
        {"share_refused", (*stream)->info().share_refused},
        {"status", ended ? "OK" : status.ToString()}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "%llu samples in %llu batches (%llu skipped) in %.2f s: %.1f "
        "samples/s, first batch after %.3f s; digest %016llx; next position "
        "epoch %llu step %llu\n",
        (unsigned long long)samples, (unsigned long long)batches,
        (unsigned long long)skipped, seconds,
        seconds > 0 ? samples / seconds : 0.0, first_batch_seconds,
        (unsigned long long)hash, (unsigned long long)next.epoch,
        (unsigned long long)next.step);
  }
  return ended ? 0 : 1;
}

}  // namespace

void AddStreamCommand(CLI::App& app) {
  auto flags = std::make_shared<StreamFlags>();
  CLI::App* cmd = app.add_subcommand(
      "stream",
      "Consume a stream from stokerd and report samples/s (the reference "
      "client and smoke test)");
  StreamOptions& o = flags->options;
  AddConnectFlags(cmd, &flags->connect);
  cmd->add_option("--dataset,-d", o.dataset, "Dataset name from the config")
      ->required();
  cmd->add_option("--pipeline,-p", o.pipeline, "Pipeline name from the config")
      ->required();
  cmd->add_option("--batch-size,-b", o.batch_size, "Samples per batch")
      ->required();
  cmd->add_option("--epochs,-e", o.epochs, "Epochs to stream; 0 is endless")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed,
                  "Shuffle and augmentation seed: same seed, same batches")
      ->capture_default_str();
  cmd->add_option("--rank", o.rank, "This consumer's rank in its job")
      ->capture_default_str();
  cmd->add_option("--world-size", o.world_size, "Ranks in the job")
      ->capture_default_str();
  cmd->add_option("--job-id", o.job_id,
                  "Job id; the ranks of one job share one epoch plan");
  cmd->add_flag("--drop-last", o.drop_last,
                "Leave out the tail of an epoch that cannot fill a whole step "
                "across all ranks");
  cmd->add_option("--ra-reps", o.ra_reps,
                  "Repeated augmentation: each sample this many times per "
                  "epoch (1..64), each copy augmented differently, spread "
                  "over the ranks as torchvision's RASampler does")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--prefetch", o.prefetch,
                  "Batches in flight; 0 takes the daemon's default")
      ->capture_default_str();
  cmd->add_option("--transport", o.transport, "grpc, shm or cuda_ipc")
      ->capture_default_str();
  cmd->add_option("--compression", flags->compression,
                  "grpc: none, zstd (every batch, level 1) or auto (a batch "
                  "whenever sending has fallen behind building), for a slow "
                  "link to a daemon on another machine")
      ->check(CLI::IsMember({"none", "zstd", "auto"}))
      ->capture_default_str();
  cmd->add_flag("--share", o.share,
                "Join a shared preprocessing run: jobs asking for the same "
                "dataset, pipeline, seed, batch size and world size get the "
                "same batches, built once");
  cmd->add_option("--weight", o.weight,
                  "The job's fair share of the daemon's workers, if this "
                  "stream starts the job and the config names none")
      ->capture_default_str();

  cmd->add_option("--start-epoch", o.start.epoch,
                  "Resume position: epoch of the first batch")
      ->capture_default_str();
  cmd->add_option("--start-step", o.start.step,
                  "Resume position: step of the first batch")
      ->capture_default_str();
  cmd->add_option("--end-epoch", o.end.epoch,
                  "Stop before this position (with --end-step), or at the "
                  "end of --epochs if that is sooner; 0 and 0: no end "
                  "position")
      ->capture_default_str();
  cmd->add_option("--end-step", o.end.step,
                  "Stop before this position: its step (see --end-epoch)")
      ->capture_default_str();
  cmd->add_option("--open-timeout", flags->open_timeout_s,
                  "Seconds opening may wait: for the daemon (a refused TLS "
                  "handshake shows as UNAVAILABLE after it), and in the "
                  "daemon for memory budget or this rank's previous stream")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--reconnect-timeout", flags->reconnect_timeout_s,
                  "Seconds the stream keeps reconnecting and resuming after "
                  "the daemon went away or ended it UNAVAILABLE (its "
                  "dataset's source failed), from the first failure that "
                  "no batch followed; 0: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-batches", flags->max_batches,
                  "Stop after this many batches (0: until the stream ends); "
                  "the next position is printed for a resume")
      ->capture_default_str();
  cmd->add_option("--step-ms", flags->step_ms,
                  "Pretend to be a trainer: spend this many milliseconds on "
                  "each batch before asking for the next")
      ->capture_default_str();
  cmd->add_option("--indices-out", flags->indices_out,
                  "Write the delivered sample ids, in order, one per line "
                  "(flushed after each batch); with --ra-reps above 1, "
                  "'id rep' per line");
  cmd->add_flag("--json", flags->json,
                "End with one JSON line: samples, batches, skipped_samples, "
                "shared_batches, seconds, samples_per_second, "
                "first_batch_seconds, steady_samples_per_second, "
                "content_digest (XXH3-64 of all tensor bytes in order), "
                "next_position, reconnects, transport, notice_socket, "
                "share_refused (why --share built alone), status");
  cmd->add_flag(
      "--quiet,-q", flags->quiet,
      "No progress lines on stderr (batches; the copy of a dataset the "
      "daemon is staging while the open waits for it)");
  cmd->callback([flags] { throw CLI::RuntimeError(RunStream(*flags)); });
}

}  // namespace stoker::cli
