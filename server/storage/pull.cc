// Pull (transfer.h): a dataset from a Store into a local folder.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/file_util.h"
#include "server/storage/part_journal.h"
#include "server/storage/puller.h"
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

// Keeps what an interrupted pull of this manifest left of `f`'s part file
// in `state`: the ranges its journal names, if the journal is whole, was
// written for this version of the file, and the part file has its size.
// Returns why a journal was found and not kept; empty if kept or none.
std::string Resume(const std::string& state, FileJob& f) {
  const std::string part = Puller::PartPath(state, f.name);
  absl::StatusOr<dataset::RangeSet> ranges =
      PartJournal::Load(PartJournal::PathOf(part), f.bytes, f.key);
  if (absl::IsNotFound(ranges.status())) return "";
  if (!ranges.ok()) return std::string(ranges.status().message());
  if (ranges->runs().empty()) return "";
  if (const uint64_t size = LocalSize(part); size != f.bytes) {
    return absl::StrCat(part, " has ",
                        size == UINT64_MAX ? "gone" : absl::StrCat(size),
                        " bytes, not ", f.bytes);
  }
  f.resumed = *std::move(ranges);
  return "";
}

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
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
    const fs::path ext = e.path().extension();
    if (ext == ".part" || ext == ".ranges") fs::remove(e.path(), ec);
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
  uint64_t parts_resumed = 0;
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
    f->key = PartJournal::KeyOf(f->digest, *text);
    if (std::string why = Resume(state, *f); !why.empty() && options.notice) {
      options.notice(
          absl::StrCat(why, ": fetching ", f->name, " from its start"));
    }
    if (const uint64_t kept = f->resumed.bytes(); kept > 0) {
      initial.bytes_done += kept;
      report.bytes_resumed += kept;
      ++parts_resumed;
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
  if ((report.files_reused > 0 || parts_resumed > 0) && options.notice) {
    std::string line = absl::StrCat("resuming: ", report.files_reused, " of ",
                                    all.size(), " files are already in ", dest);
    if (parts_resumed > 0) {
      absl::StrAppend(&line, ", and ", parts_resumed, " part file",
                      parts_resumed == 1 ? " keeps " : "s keep ",
                      Mib(report.bytes_resumed), " (", report.bytes_resumed,
                      " bytes) written before");
    }
    options.notice(line);
  }
  Meter meter(options.progress, initial);
  Puller puller(source, dest, state, options, *manifest, &meter);
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
