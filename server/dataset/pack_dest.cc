#include "server/dataset/pack_dest.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "server/dataset/file_util.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPage = 4096;
// LMDB's largest value kept in a leaf page with a 4 KiB page and an 8-byte
// key: me_nodemax (2038) less the node header and the key.
constexpr uint64_t kMaxInlineValue = 2038 - 8 - 8;

std::string Megabytes(uint64_t bytes) {
  return absl::StrFormat("%.1f MB", bytes / 1e6);
}

// The folder DST lives in, for messages and statvfs.
std::string ParentOf(const std::string& dst) {
  const fs::path parent = fs::path(dst).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Whether `dir` holds a pack's marker file (not a link, not a folder).
bool HasMarker(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(
      fs::symlink_status(fs::path(dir) / kPackTempMarker, ec));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PackTempDir>> PackTempDir::Create(
    const std::string& dst) {
  const std::string path = absl::StrCat(dst, ".tmp-", ::getpid());
  std::error_code ec;
  if (fs::exists(path, ec)) {
    // Left by an earlier process with our pid, or someone's own folder.
    if (!HasMarker(path)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create ", path,
                       ": a folder of that name exists and is not "
                       "a pack's temporary folder (it has no ",
                       kPackTempMarker, "); move it away"));
    }
    fs::remove_all(path, ec);
  }
  if (absl::Status s = CheckDestParent(dst); !s.ok()) return s;
  if (!fs::create_directory(path, ec)) {
    return absl::ErrnoToStatus(ec.value(),
                               absl::StrCat("cannot create ", path));
  }
  const std::string marker = absl::StrCat(path, "/", kPackTempMarker);
  const int marker_fd =
      ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const int fd = marker_fd < 0
                     ? -1
                     : ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (marker_fd >= 0) ::close(marker_fd);
    if (fd >= 0) ::close(fd);
    fs::remove_all(path, ec);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot set up ", path));
  }
  ::close(marker_fd);
  return std::unique_ptr<PackTempDir>(new PackTempDir(path, fd));
}

absl::Status PackTempDir::RemoveMarker() {
  const std::string marker = absl::StrCat(path_, "/", kPackTempMarker);
  if (::unlink(marker.c_str()) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot remove ", marker));
  }
  return absl::OkStatus();
}

absl::Status CheckDestParent(const std::string& dst) {
  const std::string parent = ParentOf(dst);
  std::error_code ec;
  const fs::file_status st = fs::status(parent, ec);
  if (!fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat(
        "cannot pack into ", dst, ": its parent folder ", parent,
        " does not exist; create it first (mkdir -p ", parent, ")"));
  }
  if (!fs::is_directory(st)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot pack into ", dst, ": ", parent, " is not a folder"));
  }
  return absl::OkStatus();
}

PackTempDir::~PackTempDir() {
  std::error_code ignored;
  if (!kept_) fs::remove_all(path_, ignored);
  ::close(lock_fd_);
}

std::vector<std::string> RemoveStaleTempDirs(const std::string& dst) {
  std::vector<std::string> out;
  const std::string prefix = fs::path(dst).filename().string() + ".tmp-";
  std::error_code ec;
  for (fs::directory_iterator it(ParentOf(dst), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(absl::string_view(name).substr(prefix.size()),
                          &pid) ||
        pid <= 0 || pid == ::getpid()) {
      continue;
    }
    // Alive, or alive as someone else's (EPERM): not ours to remove.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string path = it->path().string();
    // No marker: a folder that only has a pack's name, not ours to remove.
    if (!HasMarker(path)) continue;
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    // A pack in another PID namespace still holds its lock.
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    if (!free) continue;
    std::error_code remove_ec;
    fs::remove_all(path, remove_ec);
    out.push_back(
        remove_ec
            ? absl::StrCat("cannot remove ", path, ", left by pack process ",
                           pid, ": ", remove_ec.message())
            : absl::StrCat("removed ", path, ", left by pack process ", pid,
                           ", which is gone"));
  }
  return out;
}

uint64_t EstimateShardBytes(const std::vector<uint64_t>& value_bytes,
                            uint64_t shards) {
  uint64_t overflow = 0, leaf = 0;
  for (uint64_t v : value_bytes) {
    if (v > kMaxInlineValue) {
      overflow += (v + 16 + kPage - 1) / kPage * kPage;  // Page header.
      leaf += 8 + 8 + 8 + 2;  // Node, key, page number, pointer.
    } else {
      leaf += 8 + 8 + v + 2;  // Node, key, value, pointer.
    }
  }
  // Leaf pages are full in append order; a branch entry per leaf page.
  const uint64_t leaf_pages = (leaf + kPage - 17) / (kPage - 16);
  const uint64_t branch_pages = leaf_pages / 200 + 1;
  return overflow + (leaf_pages + branch_pages) * kPage + shards * 2 * kPage;
}

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

absl::Status NoSpaceError(const std::string& dst, uint64_t needed,
                          uint64_t free, absl::string_view detail) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "no space left on the filesystem of ", ParentOf(dst), " (for ", dst,
      "): the pack needs about ", Megabytes(needed), ", ", Megabytes(free),
      " were free", detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
}

// Checks the destination before any work: absent, or a dataset and `force`.
absl::Status CheckDestination(const std::string& dst, bool force) {
  std::error_code ec;
  if (!fs::exists(dst, ec)) return absl::OkStatus();
  if (!force) {
    return absl::AlreadyExistsError(
        absl::StrCat(dst, " exists; pass --force to replace it"));
  }
  if (!fs::exists(fs::path(dst) / kManifestFile, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to replace ", dst, ": it is not a dataset (no ",
                     kManifestFile, ")"));
  }
  return absl::OkStatus();
}

// Whether `path` is `dir` or lies below it, after resolving both.
bool IsInside(const std::string& path, const std::string& dir) {
  std::error_code ec;
  std::string p = fs::weakly_canonical(path, ec).string();
  std::string d = fs::weakly_canonical(dir, ec).string();
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return p == d || absl::StartsWith(p, d + "/");
}

// Writes the manifest last, durably, so that a folder with a manifest
// holds complete shards.
absl::Status WriteManifest(const std::string& dir, const Manifest& m) {
  const std::string path = absl::StrCat(dir, "/", kManifestFile);
  if (absl::Status s = WriteFileDurably(path, SerializeManifest(m)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  if (absl::Status s = SyncDir(dir); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(dir, ": ", s.message()));
  }
  return absl::OkStatus();
}

// Moves the finished `tmp` to `dst`. An existing `dst` is first moved
// aside, so that at every moment `dst` is either the old or the new
// dataset, and removed once the new one is in place.
absl::Status Publish(const std::string& tmp, const std::string& dst) {
  std::error_code ec;
  const std::string old = absl::StrCat(dst, ".old-", ::getpid());
  const bool replace = fs::exists(dst, ec);
  if (replace) fs::rename(dst, old, ec);
  if (!ec) {
    fs::rename(tmp, dst, ec);
    std::error_code ignored;
    if (ec && replace) fs::rename(old, dst, ignored);  // Put it back.
  }
  if (ec) {
    return absl::ErrnoToStatus(
        ec.value(),
        absl::StrCat("cannot move ", tmp, " to ", dst, ": ", ec.message()));
  }
  if (replace) fs::remove_all(old, ec);
  const fs::path parent = fs::path(dst).parent_path();
  const std::string parent_dir = parent.empty() ? "." : parent.string();
  if (absl::Status s = SyncDir(parent_dir); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(parent_dir, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace stoker::dataset
