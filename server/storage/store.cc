#include "server/storage/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace stoker::storage {

absl::StatusOr<UploadFile> UploadFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  return UploadFile(fd, static_cast<uint64_t>(st.st_size));
}

UploadFile::~UploadFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const Location& location,
                                                 const StoreOptions& options) {
  switch (location.kind) {
    case Location::Kind::kLocal:
      return MakeLocalStore(location);
    case Location::Kind::kHttp:
      return MakeHttpStore(location, options);
    case Location::Kind::kS3:
      return MakeS3Store(location, options);
  }
  return absl::InternalError("unknown location kind");
}

}  // namespace stoker::storage
