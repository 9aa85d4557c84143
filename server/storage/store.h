// A place that holds the files of packed datasets: a local folder (a disk
// or a mount: NFS, CephFS, Lustre, a FUSE mount), an HTTP(S) server, or an
// S3-compatible object store. Pull and push work against this interface
// only, so each kind is one file behind it.
//
// Names are plain file names relative to the location (manifest.json,
// shard-00000.lmdb). Errors name the location or URL, never a credential
// (http_client.h lists the codes).
//
// Thread-safe: every method may be called from many threads at once.
#ifndef STOKER_SERVER_STORAGE_STORE_H_
#define STOKER_SERVER_STORAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/storage/aws_config.h"
#include "server/storage/http_client.h"
#include "server/storage/url.h"

namespace stoker::storage {

struct ObjectInfo {
  std::string name;
  uint64_t size = 0;
};

// Counts bytes as they move, for progress; may be empty.
using ByteCounter = std::function<void(uint64_t)>;

class Store {
 public:
  virtual ~Store() = default;

  // The location, for messages.
  virtual std::string Display() const = 0;

  // The size of `name`. NotFound if it is absent.
  virtual absl::StatusOr<uint64_t> Stat(const std::string& name) = 0;

  // The files directly in the location, by name. Unimplemented for HTTP,
  // which has no listing.
  virtual absl::StatusOr<std::vector<ObjectInfo>> List() = 0;

  // Bytes [offset, offset + length) of `name` into `fd` at `fd_offset`
  // (pwrite; a retry writes them again). length 0: to the end of the file.
  virtual absl::Status ReadToFile(const std::string& name, uint64_t offset,
                                  uint64_t length, int fd, uint64_t fd_offset,
                                  const ByteCounter& counter) = 0;

  // Bytes [offset, offset + length) of `name`; length 0: to the end.
  virtual absl::StatusOr<std::string> Read(const std::string& name,
                                           uint64_t offset,
                                           uint64_t length) = 0;

  // Writes `bytes` as `name`, replacing it whole: a reader sees the old or
  // the new file, never a part.
  virtual absl::Status Put(const std::string& name,
                           const std::string& bytes) = 0;

  // Writes the local file `path` as `name`, as Put does; an S3 store sends
  // a file over StoreOptions::part_bytes as a multipart upload.
  virtual absl::Status PutFile(const std::string& name, const std::string& path,
                               const ByteCounter& counter) = 0;
};

struct StoreOptions {
  HttpOptions http;
  EnvLookup env = ProcessEnv();
  // S3: files over this size are sent in parts of this size (at least
  // 5 MiB, S3's smallest part but the last), up to 4 at a time.
  uint64_t part_bytes = uint64_t{64} << 20;
};

// The store for `location`.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const Location& location,
                                                 const StoreOptions& options);

// A local file opened to be uploaded: its descriptor, closed with the
// object, and its size.
class UploadFile {
 public:
  // Opens `path`; an error names it.
  static absl::StatusOr<UploadFile> Open(const std::string& path);
  UploadFile(UploadFile&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}
  UploadFile& operator=(UploadFile&&) = delete;
  ~UploadFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  UploadFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  int fd_;
  uint64_t size_;
};

// Implementations, one file each.
std::unique_ptr<Store> MakeLocalStore(const Location& location);
std::unique_ptr<Store> MakeHttpStore(const Location& location,
                                     const StoreOptions& options);
absl::StatusOr<std::unique_ptr<Store>> MakeS3Store(const Location& location,
                                                   const StoreOptions& options);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_STORE_H_
