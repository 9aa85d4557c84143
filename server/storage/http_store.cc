// The Store of an HTTP(S) server: HEAD for a size, ranged GETs, and PUT
// (WebDAV's, which nginx's dav module and most object gateways accept; the
// server writes the body to a temporary file and renames it, so a reader
// never sees a part).

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/storage/store.h"

namespace stoker::storage {
namespace {

class HttpStore : public Store {
 public:
  HttpStore(Location location, const StoreOptions& options)
      : location_(std::move(location)), client_(options.http) {}

  std::string Display() const override { return location_.Display(); }

  absl::StatusOr<uint64_t> Stat(const std::string& name) override {
    HttpRequest r;
    r.method = "HEAD";
    r.url = location_.Key(name);
    absl::StatusOr<HttpResponse> got = client_.Perform(r, 404);
    if (!got.ok()) return got.status();
    if (got->status == 404) {
      return absl::NotFoundError(absl::StrCat("HEAD ", r.url, ": HTTP 404"));
    }
    uint64_t size = 0;
    auto it = got->headers.find("content-length");
    if (it == got->headers.end() || !absl::SimpleAtoi(it->second, &size)) {
      return absl::FailedPreconditionError(
          absl::StrCat("HEAD ", r.url, ": no Content-Length in the answer"));
    }
    return size;
  }

  absl::StatusOr<std::vector<ObjectInfo>> List() override {
    return absl::UnimplementedError(
        absl::StrCat(location_.Display(),
                     ": an HTTP server has no listing; read the "
                     "dataset's manifest.json instead"));
  }

  absl::Status ReadToFile(const std::string& name, uint64_t offset,
                          uint64_t length, int fd, uint64_t fd_offset,
                          const ByteCounter& counter) override {
    HttpRequest r = Get(name, offset, length);
    r.sink_fd = fd;
    r.sink_offset = fd_offset;
    r.on_bytes = counter;
    return client_.Perform(r).status();
  }

  absl::StatusOr<std::string> Read(const std::string& name, uint64_t offset,
                                   uint64_t length) override {
    absl::StatusOr<HttpResponse> got =
        client_.Perform(Get(name, offset, length));
    if (!got.ok()) return got.status();
    return std::move(got->body);
  }

  absl::Status Put(const std::string& name, const std::string& bytes) override {
    HttpRequest r;
    r.method = "PUT";
    r.url = location_.Key(name);
    r.body = bytes;
    return client_.Perform(r).status();
  }

  absl::Status PutFile(const std::string& name, const std::string& path,
                       const ByteCounter& counter) override {
    absl::StatusOr<UploadFile> file = UploadFile::Open(path);
    if (!file.ok()) return file.status();
    HttpRequest r;
    r.method = "PUT";
    r.url = location_.Key(name);
    r.body_fd = file->fd();
    r.body_length = file->size();
    absl::Status s = client_.Perform(r).status();
    if (s.ok() && counter) counter(r.body_length);
    return s;
  }

 private:
  HttpRequest Get(const std::string& name, uint64_t offset, uint64_t length) {
    HttpRequest r;
    r.url = location_.Key(name);
    r.range_offset = offset;
    r.range_length = length;
    return r;
  }

  const Location location_;
  HttpClient client_;
};

}  // namespace

std::unique_ptr<Store> MakeHttpStore(const Location& location,
                                     const StoreOptions& options) {
  return std::make_unique<HttpStore>(location, options);
}

}  // namespace stoker::storage
