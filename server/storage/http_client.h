// HTTP(S) requests over libcurl, with retries (retry.h): one request at a
// time per call, connections reused between calls through a small pool of
// curl handles. The body of a request comes from memory or from a range of
// a file; the body of an answer goes to memory or into a file at an offset.
// An S3 request is signed by libcurl's AWS SigV4 (CURLOPT_AWS_SIGV4), from
// the credentials in Request::sign; docs/storage.md says why.
//
// Errors name the method, the URL without user info or query, and the HTTP
// status or the transport error; never a credential. Codes: NotFound (404),
// PermissionDenied (401, 403), OutOfRange (416), Unavailable (5xx, 408, 429
// and transport errors, after the last retry), FailedPrecondition (other
// 4xx).
//
// Thread-safe: Perform may be called from many threads at once.
#ifndef STOKER_SERVER_STORAGE_HTTP_CLIENT_H_
#define STOKER_SERVER_STORAGE_HTTP_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/storage/aws_config.h"
#include "server/storage/retry.h"

namespace stoker::storage {

struct SigV4 {
  std::string region;
  std::string service = "s3";
  Credentials credentials;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;  // Path and query already encoded.
  std::vector<std::string> headers;
  // Bytes [offset, offset + length) of the resource; length 0: from offset
  // to the end.
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
  // The body: `body`, or `body_length` bytes of `body_fd` from
  // `body_offset` when body_fd >= 0.
  std::string body;
  int body_fd = -1;
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  // Where the answer's body goes: into `sink_fd` from `sink_offset` when
  // sink_fd >= 0 (a retry writes it again from there), else into
  // HttpResponse::body.
  int sink_fd = -1;
  uint64_t sink_offset = 0;
  // Signs the request when set. Never copied into a message.
  std::optional<SigV4> sign;
  // Called with the count of body bytes received, as they arrive, from the
  // calling thread; bytes of an attempt that failed are counted again by
  // the next, after on_retry.
  std::function<void(uint64_t)> on_bytes;
  // Called before each retry with what failed, for logs and counters.
  std::function<void(const absl::Status&)> on_retry;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // Names in lower case.
};

struct HttpOptions {
  RetryPolicy retry;
  absl::Duration connect_timeout = absl::Seconds(10);
  // A transfer slower than 1 byte/s for this long is cut and retried.
  absl::Duration stall_timeout = absl::Seconds(30);
  // Called before each retry of any request, after its own on_retry, with
  // what failed (counters). May be empty; called from the calling threads.
  std::function<void(const absl::Status&)> on_retry;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `r`, retrying what may pass, and returns the final 2xx answer or
  // an error (above). With `accept_status`, answers with that status are
  // returned as well (e.g. 404 for a stat).
  absl::StatusOr<HttpResponse> Perform(const HttpRequest& r,
                                       long accept_status = 0);

 private:
  // One attempt. Sets *retryable for failures worth another.
  absl::StatusOr<HttpResponse> Attempt(const HttpRequest& r, bool* retryable);
  void* TakeHandle() ABSL_LOCKS_EXCLUDED(mu_);
  void ReturnHandle(void* handle) ABSL_LOCKS_EXCLUDED(mu_);

  const HttpOptions options_;
  absl::Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);  // CURL*, owned.
};

// "Service Unavailable" for 503, "" for a status it does not know.
const char* HttpReason(long status);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_HTTP_CLIENT_H_
