// Pull (transfer.h): a dataset from a Store into a local folder.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/file_util.h"
#include "server/dataset/parallel.h"
#include "server/dataset/shard_index.h"
#include "server/dataset/verifier.h"
#include "server/storage/transfer.h"
#include "server/storage/transfer_util.h"

namespace stoker::storage {
namespace {

namespace fs = std::filesystem;
using dataset::kManifestFile;

constexpr char kDestLockedPayload[] = "stoker.dev/pull-dest-locked";
using dataset::Manifest;
using dataset::ShardInfo;

// Holds the flock on DEST/.stoker-pull/lock while it lives.
class DestLock {
 public:
  static absl::StatusOr<std::unique_ptr<DestLock>> Take(
      const std::string& state, const std::string& dest) {
    const std::string path = state + "/lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
      ::close(fd);
      absl::Status locked = absl::FailedPreconditionError(
          absl::StrCat("another pull (pid ", n > 0 ? buf : "unknown",
                       ") is writing ", dest, "; wait for it or stop it"));
      locked.SetPayload(kDestLockedPayload, absl::Cord("1"));
      return locked;
    }
    const std::string pid = absl::StrCat(::getpid());
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      // The pid is only for the message above; the lock is what counts.
    }
    return std::unique_ptr<DestLock>(new DestLock(fd));
  }
  ~DestLock() { ::close(fd_); }

 private:
  explicit DestLock(int fd) : fd_(fd) {}
  const int fd_;
};

// One file of the dataset to fetch.
struct FileJob {
  std::string name;
  uint64_t bytes = 0;
  std::string digest;                // Empty: check by records.
  const ShardInfo* shard = nullptr;  // For a shard file; null for an index.
  std::atomic<uint64_t> chunks_left{0};
};

struct Chunk {
  FileJob* file;
  uint64_t offset;
  uint64_t length;
};

class Puller {
 public:
  Puller(Store& source, std::string dest, const TransferOptions& options,
         Manifest manifest, Meter* meter)
      : source_(source),
        dest_(std::move(dest)),
        state_(absl::StrCat(dest_, "/", kPullStateDir)),
        options_(options),
        manifest_(std::move(manifest)),
        meter_(meter) {}
  ~Puller() {
    if (options_.parts != nullptr) options_.parts->CloseAll();
  }

  // Fetches `files`; returns the first error.
  absl::Status FetchAll(std::vector<std::unique_ptr<FileJob>>& files) {
    std::vector<Chunk> chunks;
    const uint64_t step = std::max<uint64_t>(options_.chunk_bytes, 1);
    for (auto& f : files) {
      if (absl::Status s = CreatePart(*f); !s.ok()) return s;
      if (options_.parts != nullptr && f->shard != nullptr) {
        if (absl::Status s = options_.parts->Open(f->name, PartPath(*f));
            !s.ok()) {
          return s;
        }
      }
      const uint64_t n = f->bytes == 0 ? 1 : (f->bytes + step - 1) / step;
      for (uint64_t c = 0; c < n; ++c) {
        const uint64_t at = c * step;
        chunks.push_back({f.get(), at, std::min(step, f->bytes - at)});
      }
      f->chunks_left = n;
    }
    dataset::ParallelFor(std::max(1, options_.parallel), chunks.size(),
                         [&](uint64_t i) { RunChunk(chunks[i]); });
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  std::string PartPath(const FileJob& f) const {
    return absl::StrCat(state_, "/", f.name, ".part");
  }

  std::string SourceName(const FileJob& f) const {
    return absl::StrCat(source_.Display(), "/", f.name);
  }

  absl::Status CreatePart(const FileJob& f) {
    const std::string path = PartPath(f);
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(f.bytes)) != 0) {
      const absl::Status s =
          absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
      if (fd >= 0) ::close(fd);
      return s;
    }
    ::close(fd);
    return absl::OkStatus();
  }

  void Fail(const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = s;
  }

  bool Failed() {
    absl::MutexLock lock(&mu_);
    return !first_error_.ok();
  }

  // Fetches [offset, offset + length) of `f` into its part file; with
  // `skip_present`, only the ranges a ranged read has not written there.
  absl::Status Fetch(const FileJob& f, uint64_t offset, uint64_t length,
                     bool skip_present) {
    const std::string path = PartPath(f);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
    }
    uint64_t fetched = 0;
    absl::Status s;
    if (skip_present && options_.parts != nullptr) {
      // In pieces, each claimed while in flight (part_files.h), so that a
      // ranged read waits for a piece rather than fetching its bytes again.
      const uint64_t piece = std::max<uint64_t>(options_.piece_bytes, 1);
      for (uint64_t at = offset; s.ok() && at < offset + length; at += piece) {
        const uint64_t n = std::min(piece, offset + length - at);
        const std::vector<dataset::RangeSet::Range> ranges =
            options_.parts->Claim(f.name, at, n, options_.min_kept_bytes);
        for (const auto& [begin, end] : ranges) {
          s = source_.ReadToFile(f.name, begin, end - begin, fd, begin,
                                 [this](uint64_t k) { meter_->Add(k); });
          if (!s.ok()) break;
          fetched += end - begin;
        }
        options_.parts->Release(f.name, ranges, s.ok());
      }
    } else if (length > 0) {
      s = source_.ReadToFile(f.name, offset, length, fd, offset,
                             [this](uint64_t k) { meter_->Add(k); });
      if (s.ok()) fetched = length;
    }
    if (s.ok() && ::fsync(fd) != 0) {
      s = absl::ErrnoToStatus(errno, absl::StrCat("cannot sync ", path));
    }
    ::close(fd);
    if (s.ok()) meter_->Skip(length - fetched);
    return s;
  }

  void RunChunk(const Chunk& c) {
    if (Failed()) return;
    if (options_.cancelled && options_.cancelled()) {
      Fail(absl::CancelledError(
          absl::StrCat("the pull into ", dest_, " was stopped")));
      return;
    }
    if (absl::Status s = Fetch(*c.file, c.offset, c.length, true); !s.ok()) {
      Fail(s);
      return;
    }
    if (--c.file->chunks_left == 0) {
      if (absl::Status s = Finish(*c.file); !s.ok()) Fail(s);
    }
  }

  // Why the part file of `f` is not the file the manifest describes; OK if
  // it is.
  absl::Status Check(const FileJob& f) {
    if (!f.digest.empty()) {
      absl::StatusOr<std::string> got = dataset::FileDigest(PartPath(f));
      if (!got.ok()) return got.status();
      if (*got == f.digest) return absl::OkStatus();
      return absl::DataLossError(
          absl::StrCat("digest is ", *got, ", the manifest says ", f.digest));
    }
    ShardInfo copy = *f.shard;
    copy.file = absl::StrCat(f.name, ".part");
    const dataset::VerifyReport r =
        dataset::VerifyShard(state_, manifest_, copy);
    if (r.errors.empty()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(
        r.errors.size(), " bad record(s), the first: ", r.errors.front()));
  }

  // Checks the complete part file, fetching it once more if it is bad, and
  // publishes it.
  absl::Status Finish(const FileJob& f) {
    // No ranged read writes into it from here on.
    if (options_.parts != nullptr) options_.parts->Close(f.name);
    absl::Status bad = Check(f);
    if (!bad.ok() && !absl::IsDataLoss(bad)) return bad;
    if (!bad.ok()) {
      Notice(absl::StrCat(f.name, " from ", SourceName(f), ": ", bad.message(),
                          "; fetching it again"));
      meter_->Retract(f.bytes);
      if (absl::Status s = Fetch(f, 0, f.bytes, false); !s.ok()) return s;
      bad = Check(f);
      if (!bad.ok()) {
        return absl::DataLossError(absl::StrCat(
            f.shard != nullptr ? "shard " : "record index ", f.name, " from ",
            SourceName(f), ": ", bad.message(), " (fetched twice)"));
      }
    }
    const std::string to = absl::StrCat(dest_, "/", f.name);
    if (::rename(PartPath(f).c_str(), to.c_str()) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot rename ", PartPath(f), " to ", to));
    }
    meter_->FileDone();
    Published(f.name);
    return absl::OkStatus();
  }

  void Notice(const std::string& line) {
    absl::MutexLock lock(&mu_);
    if (options_.notice) options_.notice(line);
  }

  void Published(const std::string& name) {
    absl::MutexLock lock(&mu_);
    if (options_.on_published) options_.on_published(name);
  }

  Store& source_;
  const std::string dest_;
  const std::string state_;
  const TransferOptions& options_;
  const Manifest manifest_;
  Meter* const meter_;
  absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

// The files of `m` in the order they are fetched: every record index, then
// every shard, in shard order.
std::vector<std::unique_ptr<FileJob>> FilesOf(const Manifest& m) {
  std::vector<std::unique_ptr<FileJob>> out;
  for (const ShardInfo& s : m.shards) {
    if (!s.has_index()) continue;
    auto index = std::make_unique<FileJob>();
    index->name = s.index_file;
    index->bytes = s.index_bytes;
    index->digest = s.index_digest;
    out.push_back(std::move(index));
  }
  for (const ShardInfo& s : m.shards) {
    auto shard = std::make_unique<FileJob>();
    shard->name = s.file;
    shard->bytes = s.bytes;
    shard->digest = s.digest;
    shard->shard = &s;
    out.push_back(std::move(shard));
  }
  return out;
}

uint64_t LocalSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(st.st_size);
}

// Removes what a pull of another manifest (`old_text`) left in `dest`.
void ForgetOtherPull(const std::string& dest, const std::string& state,
                     const std::string& old_text) {
  absl::StatusOr<Manifest> old = dataset::ParseManifest(old_text, state);
  std::error_code ec;
  if (old.ok()) {
    for (const auto& f : FilesOf(*old)) fs::remove(dest + "/" + f->name, ec);
  }
  for (const auto& e : fs::directory_iterator(state, ec)) {
    if (e.path().extension() == ".part") fs::remove(e.path(), ec);
  }
}

}  // namespace

bool IsDestLocked(const absl::Status& status) {
  return status.GetPayload(kDestLockedPayload).has_value();
}

absl::StatusOr<TransferReport> Pull(Store& source, const std::string& dest,
                                    const TransferOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string state = absl::StrCat(dest, "/", kPullStateDir);
  std::error_code ec;
  fs::create_directories(state, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(),
                               absl::StrCat("cannot create ", state));
  }
  absl::StatusOr<std::unique_ptr<DestLock>> lock = DestLock::Take(state, dest);
  if (!lock.ok()) return lock.status();

  absl::StatusOr<std::string> text = source.Read(kManifestFile, 0, 0);
  if (!text.ok()) return text.status();
  absl::StatusOr<Manifest> manifest = dataset::ParseManifest(
      *text, absl::StrCat(source.Display(), "/", kManifestFile));
  if (!manifest.ok()) return manifest.status();
  for (const auto& f : FilesOf(*manifest)) {
    if (f->name == kManifestFile || f->name == kPullStateDir) {
      return absl::InvalidArgumentError(absl::StrCat(
          source.Display(), "/", kManifestFile, ": a shard or index named '",
          f->name, "' would overwrite what pull keeps in DEST"));
    }
  }
  TransferReport report;
  report.manifest = *manifest;
  if (options.on_manifest) options.on_manifest(*manifest, *text);

  const std::string dest_manifest = absl::StrCat(dest, "/", kManifestFile);
  std::string existing;
  if (dataset::ReadFileToString(dest_manifest, &existing).ok()) {
    if (existing != *text) {
      return absl::FailedPreconditionError(absl::StrCat(
          dest, " holds another dataset (its manifest differs from ",
          source.Display(), "'s); remove it or pull elsewhere"));
    }
    fs::remove_all(state, ec);
    for (const auto& f : FilesOf(*manifest)) {
      ++report.files_reused;
      if (options.on_published) options.on_published(f->name);
    }
    return report;
  }
  const std::string state_manifest = absl::StrCat(state, "/", kManifestFile);
  std::string pulling;
  if (dataset::ReadFileToString(state_manifest, &pulling).ok() &&
      pulling != *text) {
    if (options.notice) {
      options.notice(absl::StrCat(source.Display(),
                                  " changed since the interrupted pull into ",
                                  dest, ": starting over"));
    }
    ForgetOtherPull(dest, state, pulling);
  }
  if (absl::Status s = dataset::WriteFileDurably(state_manifest, *text);
      !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(state_manifest, ": ", s.message()));
  }

  std::vector<std::unique_ptr<FileJob>> all = FilesOf(*manifest);
  std::vector<std::unique_ptr<FileJob>> todo;
  TransferProgress initial;
  initial.files_total = all.size();
  for (auto& f : all) {
    initial.bytes_total += f->bytes;
    // Published by an earlier pull of this manifest: checked before the
    // rename, and the size still matches.
    if (LocalSize(absl::StrCat(dest, "/", f->name)) == f->bytes) {
      initial.bytes_done += f->bytes;
      ++initial.files_done;
      ++report.files_reused;
      if (options.on_published) options.on_published(f->name);
      continue;
    }
    todo.push_back(std::move(f));
  }
  if (options.reserve) {
    if (absl::Status s =
            options.reserve(initial.bytes_total - initial.bytes_done);
        !s.ok()) {
      return s;
    }
  }
  if (report.files_reused > 0 && options.notice) {
    options.notice(absl::StrCat("resuming: ", report.files_reused, " of ",
                                all.size(), " files are already in ", dest));
  }
  Meter meter(options.progress, initial);
  Puller puller(source, dest, options, *manifest, &meter);
  if (absl::Status s = puller.FetchAll(todo); !s.ok()) return s;
  if (absl::Status s = dataset::SyncDir(dest); !s.ok()) return s;

  const std::string tmp = absl::StrCat(dest_manifest, ".tmp");
  if (absl::Status s = dataset::WriteFileDurably(tmp, *text); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(tmp, ": ", s.message()));
  }
  if (::rename(tmp.c_str(), dest_manifest.c_str()) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot rename ", tmp, " to ", dest_manifest));
  }
  if (absl::Status s = dataset::SyncDir(dest); !s.ok()) return s;
  fs::remove_all(state, ec);
  report.bytes_moved = meter.moved();
  report.files_moved = todo.size();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace stoker::storage
