#include "server/dataset/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

absl::Status ErrnoError(absl::string_view what) {
  const int err = errno;
  return absl::ErrnoToStatus(err, absl::StrCat(what, ": ", std::strerror(err)));
}

// Closes the descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { ::close(fd_); }

 private:
  int fd_;
};

}  // namespace

absl::Status ReadFileToString(const std::string& path, std::string* out) {
  // O_NONBLOCK: a blocking open of a FIFO waits for a writer, maybe
  // forever, before fstat could refuse it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError("cannot open");
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("cannot stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError("not a regular file");
  }
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    return ErrnoError("cannot set blocking reads");
  }
  out->resize(st.st_size);
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read");
    if (n == 0) break;  // The file shrank while we read it.
    done += n;
  }
  out->resize(done);
  return absl::OkStatus();
}

absl::Status WriteFileDurably(const std::string& path, std::string_view data) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create");
  FdCloser closer(fd);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot write");
    done += n;
  }
  if (::fsync(fd) != 0) return ErrnoError("cannot fsync");
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open");
  FdCloser closer(fd);
  if (::fsync(fd) != 0) return ErrnoError("cannot fsync");
  return absl::OkStatus();
}

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s`, or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) {
    return i < s.size() && (b(i) & 0xC0) == 0x80;
  };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // Overlong.
    if (c == 0xED && b(1) >= 0xA0) return 0;  // Surrogate.
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // Overlong.
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // Above U+10FFFF.
    return 4;
  }
  return 0;
}

}  // namespace

bool IsUtf8(std::string_view s) { return Utf8PrefixLength(s) == s.size(); }

size_t Utf8PrefixLength(std::string_view s) {
  size_t good = 0;
  while (good < s.size()) {
    const size_t n = Utf8SequenceLength(s.substr(good));
    if (n == 0) break;
    good += n;
  }
  return good;
}

std::string EscapeNonUtf8(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    const size_t n = Utf8SequenceLength(s);
    if (n == 0) {
      absl::StrAppend(
          &out, "\\x",
          absl::Hex(static_cast<unsigned char>(s[0]), absl::kZeroPad2));
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    }
  }
  return out;
}

}  // namespace stoker::dataset
