// The Store of a local folder or mount: pread/pwrite, and a write to a
// temporary name renamed into place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "server/dataset/file_util.h"
#include "server/storage/store.h"

namespace stoker::storage {
namespace {

namespace fs = std::filesystem;

class LocalStore : public Store {
 public:
  explicit LocalStore(Location location) : location_(std::move(location)) {}

  std::string Display() const override { return location_.Display(); }

  absl::StatusOr<uint64_t> Stat(const std::string& name) override {
    struct stat st;
    const std::string path = location_.Key(name);
    if (::stat(path.c_str(), &st) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
    }
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<std::vector<ObjectInfo>> List() override {
    std::error_code ec;
    std::vector<ObjectInfo> out;
    for (const auto& e : fs::directory_iterator(location_.base, ec)) {
      if (!e.is_regular_file(ec)) continue;
      out.push_back({e.path().filename().string(), e.file_size(ec)});
    }
    if (ec) {
      return absl::ErrnoToStatus(ec.value(),
                                 absl::StrCat("cannot list ", location_.base));
    }
    return out;
  }

  absl::Status ReadToFile(const std::string& name, uint64_t offset,
                          uint64_t length, int fd, uint64_t fd_offset,
                          const ByteCounter& counter) override {
    return Copy(name, offset, length,
                [&](const char* data, size_t n, uint64_t at) -> absl::Status {
                  size_t done = 0;
                  while (done < n) {
                    const ssize_t w = ::pwrite(fd, data + done, n - done,
                                               fd_offset + at + done);
                    if (w < 0 && errno == EINTR) continue;
                    if (w < 0)
                      return absl::ErrnoToStatus(errno, "cannot write");
                    done += static_cast<size_t>(w);
                  }
                  if (counter) counter(n);
                  return absl::OkStatus();
                });
  }

  absl::StatusOr<std::string> Read(const std::string& name, uint64_t offset,
                                   uint64_t length) override {
    std::string out;
    absl::Status s =
        Copy(name, offset, length, [&](const char* data, size_t n, uint64_t) {
          out.append(data, n);
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    return out;
  }

  absl::Status Put(const std::string& name, const std::string& bytes) override {
    const std::string path = location_.Key(name);
    const std::string tmp = absl::StrCat(path, ".part-", ::getpid());
    if (absl::Status s = dataset::WriteFileDurably(tmp, bytes); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(tmp, ": ", s.message()));
    }
    return Rename(tmp, path);
  }

  absl::Status PutFile(const std::string& name, const std::string& src,
                       const ByteCounter& counter) override {
    const std::string path = location_.Key(name);
    const std::string tmp = absl::StrCat(path, ".part-", ::getpid());
    std::error_code ec;
    fs::create_directories(location_.base, ec);
    const int fd =
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", tmp));
    }
    Location from;
    from.base = fs::path(src).parent_path().string();
    LocalStore source(from);
    absl::Status s = source.ReadToFile(fs::path(src).filename().string(), 0, 0,
                                       fd, 0, counter);
    if (s.ok() && ::fsync(fd) != 0) {
      s = absl::ErrnoToStatus(errno, absl::StrCat("cannot sync ", tmp));
    }
    ::close(fd);
    if (!s.ok()) {
      fs::remove(tmp, ec);
      return s;
    }
    return Rename(tmp, path);
  }

 private:
  absl::Status Rename(const std::string& tmp, const std::string& path) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot rename ", tmp, " to ", path));
    }
    return dataset::SyncDir(location_.base);
  }

  // Calls `sink` with the bytes of the range, in pieces, and where each
  // piece lies relative to `offset`.
  template <typename Sink>
  absl::Status Copy(const std::string& name, uint64_t offset, uint64_t length,
                    Sink sink) {
    const std::string path = location_.Key(name);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
    }
    struct stat st;
    ::fstat(fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (length == 0) length = size > offset ? size - offset : 0;
    if (offset + length > size) {
      ::close(fd);
      return absl::OutOfRangeError(
          absl::StrCat(path, ": bytes ", offset, "..", offset + length,
                       " lie past its end (", size, " bytes)"));
    }
    std::string buf(std::min<uint64_t>(length, 4 << 20), '\0');
    uint64_t done = 0;
    absl::Status s;
    while (done < length && s.ok()) {
      const ssize_t n =
          ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), length - done),
                  offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s = n < 0
                ? absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path))
                : absl::DataLossError(absl::StrCat(path, ": shrank"));
        break;
      }
      s = sink(buf.data(), static_cast<size_t>(n), done);
      done += static_cast<uint64_t>(n);
    }
    ::close(fd);
    return s;
  }

  const Location location_;
};

}  // namespace

std::unique_ptr<Store> MakeLocalStore(const Location& location) {
  return std::make_unique<LocalStore>(location);
}

}  // namespace stoker::storage
