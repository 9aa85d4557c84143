#include "server/dataset/importers/file_range.h"

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stoker::dataset {

namespace fs = std::filesystem;

absl::StatusOr<std::vector<std::string>> ExpandShardFiles(
    const std::string& src, std::string_view suffix) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_regular_file(src, ec)) return std::vector<std::string>{src};
  if (fs::is_directory(src, ec)) {
    for (fs::directory_iterator it(src, ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code type_ec;
      if (name[0] != '.' && absl::EndsWith(name, absl::string_view(suffix.data(), suffix.size())) &&
          it->is_regular_file(type_ec)) {
        files.push_back(it->path().string());
      }
    }
    if (ec) {
      return absl::ErrnoToStatus(
          ec.value(), absl::StrCat("cannot list ", src, ": ", ec.message()));
    }
  } else {
    glob_t g{};
    if (::glob(src.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        if (fs::is_regular_file(g.gl_pathv[i], ec)) {
          files.push_back(g.gl_pathv[i]);
        }
      }
    }
    globfree(&g);
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no ", std::string(suffix), " files in ", src,
        " (give a file, a folder of them or a glob pattern)"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

absl::Status PreadAll(int fd, uint64_t offset, uint64_t size,
                      std::string* out) {
  out->resize(size);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out->data() + done, size - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "cannot read");
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(
          "truncated: ", size, " bytes at offset ", offset, " wanted, ",
          done, " there"));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

RangeFile::~RangeFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RangeFile::Open(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return absl::ErrnoToStatus(errno, "cannot open");
  return absl::OkStatus();
}

absl::Status RangeFile::Read(uint64_t offset, uint64_t size,
                             std::string* out) const {
  return PreadAll(fd_, offset, size, out);
}

absl::Status ReadRange(const std::string& path, uint64_t offset,
                       uint64_t size, std::string* out) {
  RangeFile file;
  if (absl::Status s = file.Open(path); !s.ok()) return s;
  return file.Read(offset, size, out);
}

}  // namespace stoker::dataset
