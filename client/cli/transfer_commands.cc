#include "client/cli/transfer_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "server/config/byte_size.h"
#include "server/storage/transfer.h"

namespace stoker::cli {
namespace {

using Clock = std::chrono::steady_clock;
using storage::TransferProgress;

std::string Bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f %s", v, units[u])
                : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string Duration(double seconds) {
  if (seconds < 0 || seconds > 360000) return "--:--";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600
             ? absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
             : absl::StrFormat("%d:%02d", s / 60, s % 60);
}

// Shows transfer progress on stderr: a bar redrawn in place (at most 10
// times a second) on a terminal, else a line every `interval` seconds.
// The rate counts only the bytes this run moved. Thread-compatible: the
// transfer makes one call at a time.
class TransferBar {
 public:
  TransferBar(const char* verb, double interval)
      : verb_(verb),
        tty_(isatty(fileno(stderr)) == 1),
        interval_(interval),
        start_(Clock::now()) {}
  ~TransferBar() {
    if (line_open_) std::fputc('\n', stderr);
  }

  void Update(const TransferProgress& p, bool final = false) {
    const Clock::time_point now = Clock::now();
    if (!started_) {
      started_ = true;
      first_done_ = p.bytes_done;
    }
    const double since_draw =
        std::chrono::duration<double>(now - last_draw_).count();
    if (!final && since_draw < (tty_ ? 0.1 : interval_)) return;
    last_draw_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const uint64_t moved = p.bytes_done - std::min(p.bytes_done, first_done_);
    const double rate = seconds > 0 ? moved / seconds : 0;
    const double left = static_cast<double>(p.bytes_total - p.bytes_done);
    const double eta = rate > 0 ? left / rate : -1;
    const double fraction =
        p.bytes_total > 0 ? static_cast<double>(p.bytes_done) / p.bytes_total
                          : 1.0;
    std::string bar;
    if (tty_) {
      const int filled = static_cast<int>(fraction * 24);
      bar = absl::StrCat("[", std::string(filled, '#'),
                         std::string(24 - filled, '.'), "] ");
    }
    std::fprintf(stderr,
                 "%s%s %s%5.1f%%  %s / %s  files %llu/%llu  %s/s  "
                 "ETA %s%s",
                 tty_ ? "\r" : "", verb_, bar.c_str(), 100 * fraction,
                 Bytes(p.bytes_done).c_str(), Bytes(p.bytes_total).c_str(),
                 static_cast<unsigned long long>(p.files_done),
                 static_cast<unsigned long long>(p.files_total),
                 Bytes(static_cast<uint64_t>(rate)).c_str(),
                 Duration(eta).c_str(), tty_ ? "\x1b[K" : "\n");
    std::fflush(stderr);
    line_open_ = tty_;
  }

 private:
  const char* const verb_;
  const bool tty_;
  const double interval_;
  const Clock::time_point start_;
  Clock::time_point last_draw_;
  bool started_ = false;
  uint64_t first_done_ = 0;
  bool line_open_ = false;
};

struct Flags {
  std::string from;
  std::string to;
  int parallel = 8;
  std::string chunk = "16MiB";
  std::string part = "64MiB";
  int retries = 6;
  double stall_timeout = 30;
  double connect_timeout = 10;
  double interval = 5;
  bool quiet = false;
  bool force = false;
};

void Fail(const char* command, const absl::Status& s) {
  std::fprintf(stderr, "stoker %s: %s\n", command,
               std::string(s.message()).c_str());
  throw CLI::RuntimeError(1);
}

uint64_t Size(const char* command, const char* flag, const std::string& text) {
  absl::StatusOr<uint64_t> v = config::ParseByteSize(text);
  if (!v.ok() || *v == 0) {
    std::fprintf(
        stderr, "stoker %s: %s: %s\n", command, flag,
        v.ok() ? "must be above 0" : std::string(v.status().message()).c_str());
    throw CLI::RuntimeError(2);
  }
  return *v;
}

storage::StoreOptions StoreOptionsFrom(const char* command, const Flags& f) {
  storage::StoreOptions o;
  o.http.retry.max_attempts = 1 + std::max(0, f.retries);
  o.http.stall_timeout = absl::Seconds(f.stall_timeout);
  o.http.connect_timeout = absl::Seconds(f.connect_timeout);
  o.part_bytes = Size(command, "--part-size", f.part);
  return o;
}

std::unique_ptr<storage::Store> Open(const char* command,
                                     const std::string& where,
                                     const storage::StoreOptions& options) {
  absl::StatusOr<storage::Location> loc = storage::ParseLocation(where);
  if (!loc.ok()) Fail(command, loc.status());
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenStore(*loc, options);
  if (!store.ok()) Fail(command, store.status());
  return *std::move(store);
}

void Run(const char* command, const Flags& f) {
  const bool pull = std::string(command) == "pull";
  const storage::StoreOptions store_options = StoreOptionsFrom(command, f);
  std::unique_ptr<storage::Store> remote =
      Open(command, pull ? f.from : f.to, store_options);
  TransferBar bar(pull ? "pull" : "push", f.interval);
  TransferProgress last;
  storage::TransferOptions o;
  o.parallel = f.parallel;
  o.chunk_bytes = Size(command, "--chunk-size", f.chunk);
  o.force = f.force;
  o.progress = [&](const TransferProgress& p) {
    last = p;
    if (!f.quiet) bar.Update(p);
  };
  o.notice = [&](const std::string& line) {
    std::fprintf(stderr, "stoker %s: %s\n", command, line.c_str());
  };
  absl::StatusOr<storage::TransferReport> r =
      pull ? storage::Pull(*remote, f.to, o)
           : storage::Push(f.from, *remote, o);
  if (!r.ok()) Fail(command, r.status());
  if (!f.quiet && last.files_total > 0) bar.Update(last, /*final=*/true);
  std::printf("%s %s: %llu files, %s moved in %.1f s (%llu already there)\n",
              pull ? "pulled" : "pushed", r->manifest.name.c_str(),
              static_cast<unsigned long long>(r->files_moved),
              Bytes(r->bytes_moved).c_str(), r->seconds,
              static_cast<unsigned long long>(r->files_reused));
}

void AddCommon(CLI::App* c, Flags* f) {
  c->add_option("--parallel", f->parallel,
                "Requests in flight at once (ranged GETs for pull, file "
                "uploads for push)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->add_option("--retries", f->retries,
                "Retries of a request that failed in a way that may pass "
                "(5xx, 408, 429, a refused, cut or stalled connection), "
                "with exponential backoff")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  c->add_option("--stall-timeout", f->stall_timeout,
                "Seconds without a byte before a transfer is cut and retried")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--connect-timeout", f->connect_timeout,
                "Seconds to wait for a connection")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--progress-interval", f->interval,
                "Seconds between progress lines when stderr is not a "
                "terminal (a terminal gets a bar redrawn in place)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_flag("--quiet", f->quiet, "Show no progress, only the summary");
}

constexpr char kWhere[] =
    "s3://BUCKET/PREFIX (credentials, region and endpoint from the AWS "
    "environment variables or ~/.aws/credentials; see docs/storage.md), "
    "http(s)://HOST/PATH, or a local folder or mount";

}  // namespace

void AddTransferCommands(CLI::App& app) {
  auto pull = std::make_shared<Flags>();
  CLI::App* p = app.add_subcommand(
      "pull",
      "Copy a packed dataset from shared storage into a local folder: "
      "parallel ranged GETs, every shard checked (digest, or record by "
      "record for packs without digests) before it is published, the "
      "manifest written last; an interrupted pull resumes without "
      "fetching the shards it finished");
  p->add_option("SOURCE", pull->from,
                std::string("Where the dataset is: ") + kWhere)
      ->required();
  p->add_option("DEST", pull->to,
                "The local folder to copy it into (created; locked while a "
                "pull writes it)")
      ->required();
  p->add_option("--chunk-size", pull->chunk,
                "Bytes per ranged GET (e.g. 16MiB)")
      ->capture_default_str();
  AddCommon(p, pull.get());
  p->callback([pull] { Run("pull", *pull); });

  auto push = std::make_shared<Flags>();
  CLI::App* u = app.add_subcommand(
      "push",
      "Copy a packed dataset from a local folder to shared storage: every "
      "shard and record index, then the manifest last, so that a reader "
      "never sees half a dataset");
  u->add_option("DIR", push->from, "The local dataset folder")->required();
  u->add_option("DEST", push->to, std::string("Where to put it: ") + kWhere)
      ->required();
  u->add_option("--part-size", push->part,
                "S3: files larger than this are sent as a multipart upload "
                "in parts of this size (at least 5MiB)")
      ->capture_default_str();
  u->add_flag("--force", push->force,
              "Replace another dataset already at DEST");
  AddCommon(u, push.get());
  u->callback([push] { Run("push", *push); });
}

}  // namespace stoker::cli
