// The Store of an S3-compatible object store. Requests are signed with
// SigV4 by libcurl (http_client.h). libcurl 7.88 signs the query string as
// written, without sorting or encoding it, so every query here is written
// in canonical form already: keys sorted, values encoded with UriEncode,
// and a key without value written `key=`.

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/store.h"
#include "server/storage/xml_text.h"

namespace stoker::storage {
namespace {

constexpr uint64_t kMinPartBytes = uint64_t{5} << 20;
constexpr int kPartThreads = 4;

// Whether an error answer says the credentials expired or were replaced,
// which re-reading them may mend.
bool MayBeStaleCredentials(const absl::Status& s) {
  if (!absl::IsPermissionDenied(s) && !absl::IsFailedPrecondition(s)) {
    return false;
  }
  for (const char* code :
       {"ExpiredToken", "RequestExpired", "TokenRefreshRequired",
        "InvalidToken", "InvalidAccessKeyId", "SignatureDoesNotMatch"}) {
    if (absl::StrContains(s.message(), code)) return true;
  }
  return false;
}

class S3Store : public Store {
 public:
  S3Store(Location location, const StoreOptions& options, S3Settings settings)
      : location_(std::move(location)),
        settings_(std::move(settings)),
        part_bytes_(std::max(options.part_bytes, kMinPartBytes)),
        credentials_(options.env),
        client_(options.http) {}

  std::string Display() const override { return location_.Display(); }

  absl::StatusOr<uint64_t> Stat(const std::string& name) override {
    HttpRequest r = Request("HEAD", ObjectUrl(name));
    absl::StatusOr<HttpResponse> got = Send(r, 404);
    if (!got.ok()) return got.status();
    if (got->status == 404) {
      return absl::NotFoundError(absl::StrCat("HEAD ", ObjectUrl(name),
                                              ": HTTP 404 (no such object)"));
    }
    uint64_t size = 0;
    auto it = got->headers.find("content-length");
    if (it == got->headers.end() || !absl::SimpleAtoi(it->second, &size)) {
      return absl::FailedPreconditionError(
          absl::StrCat("HEAD ", ObjectUrl(name), ": no Content-Length"));
    }
    return size;
  }

  absl::StatusOr<std::vector<ObjectInfo>> List() override {
    std::vector<ObjectInfo> out;
    const std::string prefix =
        location_.prefix.empty() ? "" : location_.prefix + "/";
    std::string token;
    for (;;) {
      // Keys in canonical (sorted) order.
      std::string query;
      if (!token.empty()) {
        query =
            absl::StrCat("continuation-token=", UriEncode(token, false), "&");
      }
      absl::StrAppend(&query, "delimiter=%2F&list-type=2&prefix=",
                      UriEncode(prefix, false));
      HttpRequest r = Request("GET", absl::StrCat(BucketUrl(), "?", query));
      absl::StatusOr<HttpResponse> got = Send(r);
      if (!got.ok()) return got.status();
      const std::vector<std::string> keys = XmlTexts(got->body, "Key");
      const std::vector<std::string> sizes = XmlTexts(got->body, "Size");
      for (size_t i = 0; i < keys.size() && i < sizes.size(); ++i) {
        ObjectInfo info;
        info.name = keys[i].substr(std::min(prefix.size(), keys[i].size()));
        absl::SimpleAtoi(sizes[i], &info.size);
        out.push_back(std::move(info));
      }
      if (XmlText(got->body, "IsTruncated").value_or("false") != "true") break;
      token = XmlText(got->body, "NextContinuationToken").value_or("");
      if (token.empty()) break;
    }
    return out;
  }

  absl::Status ReadToFile(const std::string& name, uint64_t offset,
                          uint64_t length, int fd, uint64_t fd_offset,
                          const ByteCounter& counter) override {
    HttpRequest r = Request("GET", ObjectUrl(name));
    r.range_offset = offset;
    r.range_length = length;
    r.sink_fd = fd;
    r.sink_offset = fd_offset;
    r.on_bytes = counter;
    return Send(r).status();
  }

  absl::StatusOr<std::string> Read(const std::string& name, uint64_t offset,
                                   uint64_t length) override {
    HttpRequest r = Request("GET", ObjectUrl(name));
    r.range_offset = offset;
    r.range_length = length;
    absl::StatusOr<HttpResponse> got = Send(r);
    if (!got.ok()) return got.status();
    return std::move(got->body);
  }

  absl::Status Put(const std::string& name, const std::string& bytes) override {
    HttpRequest r = Request("PUT", ObjectUrl(name));
    r.body = bytes;
    return Send(r).status();
  }

  absl::Status PutFile(const std::string& name, const std::string& path,
                       const ByteCounter& counter) override {
    absl::StatusOr<UploadFile> file = UploadFile::Open(path);
    if (!file.ok()) return file.status();
    const uint64_t size = file->size();
    if (size > part_bytes_) return Multipart(name, file->fd(), size, counter);
    HttpRequest r = Request("PUT", ObjectUrl(name));
    r.body_fd = file->fd();
    r.body_length = size;
    absl::Status s = Send(r).status();
    if (s.ok() && counter) counter(size);
    return s;
  }

 private:
  std::string BucketUrl() const {
    if (settings_.path_style) {
      return absl::StrCat(settings_.endpoint, "/",
                          UriEncode(location_.bucket, false));
    }
    return absl::StrCat("https://", location_.bucket, ".s3.", settings_.region,
                        ".amazonaws.com");
  }

  std::string ObjectUrl(const std::string& name) const {
    return absl::StrCat(BucketUrl(), "/",
                        UriEncode(location_.Key(name), /*keep_slash=*/true));
  }

  HttpRequest Request(const char* method, std::string url) const {
    HttpRequest r;
    r.method = method;
    r.url = std::move(url);
    return r;
  }

  // Signs and sends `r`; once more with credentials read again when the
  // answer says they may be stale and they changed.
  absl::StatusOr<HttpResponse> Send(HttpRequest r, long accept = 0) {
    for (int round = 0;; ++round) {
      absl::StatusOr<Credentials> c = credentials_.Get();
      if (!c.ok()) return c.status();
      r.sign = SigV4{settings_.region, "s3", *c};
      absl::StatusOr<HttpResponse> got = client_.Perform(r, accept);
      if (got.ok() || round > 0 || !MayBeStaleCredentials(got.status())) {
        return got;
      }
      absl::StatusOr<bool> changed = credentials_.Reload();
      if (!changed.ok() || !*changed) return got;
    }
  }

  absl::Status Multipart(const std::string& name, int fd, uint64_t size,
                         const ByteCounter& counter) {
    const std::string url = ObjectUrl(name);
    HttpRequest start = Request("POST", url + "?uploads=");
    absl::StatusOr<HttpResponse> started = Send(start);
    if (!started.ok()) return started.status();
    const std::string id = XmlText(started->body, "UploadId").value_or("");
    if (id.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("POST ", url, "?uploads: no UploadId in the answer"));
    }
    const std::string upload = absl::StrCat("uploadId=", UriEncode(id, false));
    const uint64_t parts = (size + part_bytes_ - 1) / part_bytes_;
    std::vector<std::string> etags(parts);
    std::atomic<uint64_t> next{0};
    absl::Mutex mu;
    absl::Status failed;
    auto work = [&] {
      for (uint64_t p = next++; p < parts; p = next++) {
        {
          absl::MutexLock lock(&mu);
          if (!failed.ok()) return;
        }
        HttpRequest r = Request(
            "PUT", absl::StrCat(url, "?partNumber=", p + 1, "&", upload));
        r.body_fd = fd;
        r.body_offset = p * part_bytes_;
        r.body_length = std::min(part_bytes_, size - r.body_offset);
        absl::StatusOr<HttpResponse> got = Send(r);
        absl::MutexLock lock(&mu);
        if (!got.ok()) {
          if (failed.ok()) failed = got.status();
          return;
        }
        auto it = got->headers.find("etag");
        if (it == got->headers.end()) {
          failed = absl::FailedPreconditionError(
              absl::StrCat("PUT ", url, " part ", p + 1, ": no ETag"));
          return;
        }
        etags[p] = it->second;
        if (counter) counter(r.body_length);
      }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < kPartThreads && i < static_cast<int>(parts); ++i) {
      threads.emplace_back(work);
    }
    for (std::thread& t : threads) t.join();
    if (!failed.ok()) {
      // Leaves no parts behind to be billed for.
      (void)Send(Request("DELETE", absl::StrCat(url, "?", upload)));
      return failed;
    }
    std::string xml = "<CompleteMultipartUpload>";
    for (uint64_t p = 0; p < parts; ++p) {
      absl::StrAppend(&xml, "<Part><PartNumber>", p + 1, "</PartNumber><ETag>",
                      XmlEscape(etags[p]), "</ETag></Part>");
    }
    xml += "</CompleteMultipartUpload>";
    HttpRequest done = Request("POST", absl::StrCat(url, "?", upload));
    done.body = xml;
    absl::StatusOr<HttpResponse> completed = Send(done);
    if (!completed.ok()) return completed.status();
    // S3 may answer 200 with an error in the body.
    if (absl::StrContains(completed->body, "<Error>")) {
      return absl::UnavailableError(
          absl::StrCat("POST ", url, " (complete upload): ",
                       XmlText(completed->body, "Code").value_or("error")));
    }
    return absl::OkStatus();
  }

  const Location location_;
  const S3Settings settings_;
  const uint64_t part_bytes_;
  CredentialsSource credentials_;
  HttpClient client_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> MakeS3Store(
    const Location& location, const StoreOptions& options) {
  return std::make_unique<S3Store>(location, options,
                                   S3SettingsFromEnv(options.env));
}

}  // namespace stoker::storage
