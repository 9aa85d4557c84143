#include "server/storage/http_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/storage/url.h"
#include "server/storage/xml_text.h"

namespace stoker::storage {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What one attempt's callbacks share.
struct Transfer {
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse response;
  std::string error_body;   // The body of a non-2xx answer.
  uint64_t received = 0;    // Body bytes of a 2xx answer.
  uint64_t sent = 0;        // Request body bytes handed to curl.
  absl::Status sink_error;  // A failed write into sink_fd.
  bool range_ignored = false;
};

long Status(CURL* curl) {
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

size_t OnData(char* data, size_t size, size_t n, void* arg) {
  Transfer& t = *static_cast<Transfer*>(arg);
  const size_t bytes = size * n;
  const long status = Status(t.curl);
  if (status < 200 || status >= 300) {
    if (t.error_body.size() < 64 * 1024) t.error_body.append(data, bytes);
    return bytes;
  }
  const HttpRequest& r = *t.request;
  if (status != 206 && r.range_offset > 0) {
    t.range_ignored = true;
    return 0;  // Aborts the transfer.
  }
  if (r.sink_fd >= 0) {
    size_t done = 0;
    while (done < bytes) {
      const ssize_t w = ::pwrite(r.sink_fd, data + done, bytes - done,
                                 r.sink_offset + t.received + done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        t.sink_error = absl::ErrnoToStatus(errno, "cannot write the download");
        return 0;
      }
      done += static_cast<size_t>(w);
    }
  } else {
    t.response.body.append(data, bytes);
  }
  t.received += bytes;
  if (r.on_bytes) r.on_bytes(bytes);
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t n, void* arg) {
  Transfer& t = *static_cast<Transfer*>(arg);
  const absl::string_view line(data, size * n);
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    t.response.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

size_t OnRead(char* buffer, size_t size, size_t n, void* arg) {
  Transfer& t = *static_cast<Transfer*>(arg);
  const HttpRequest& r = *t.request;
  const uint64_t total = r.body_fd >= 0 ? r.body_length : r.body.size();
  const size_t want =
      static_cast<size_t>(std::min<uint64_t>(size * n, total - t.sent));
  if (want == 0) return 0;
  if (r.body_fd < 0) {
    std::memcpy(buffer, r.body.data() + t.sent, want);
    t.sent += want;
    return want;
  }
  ssize_t got;
  do {
    got = ::pread(r.body_fd, buffer, want, r.body_offset + t.sent);
  } while (got < 0 && errno == EINTR);
  if (got <= 0) return CURL_READFUNC_ABORT;
  t.sent += static_cast<uint64_t>(got);
  return static_cast<size_t>(got);
}

bool IsRetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

absl::StatusCode CodeFor(long status) {
  if (status == 404) return absl::StatusCode::kNotFound;
  if (status == 401 || status == 403) {
    return absl::StatusCode::kPermissionDenied;
  }
  if (status == 416) return absl::StatusCode::kOutOfRange;
  if (IsRetryableStatus(status)) return absl::StatusCode::kUnavailable;
  return absl::StatusCode::kFailedPrecondition;
}

// "Code: Message" of an S3 error body, or "" when it has none.
std::string ErrorDetail(const std::string& body) {
  std::optional<std::string> code = XmlText(body, "Code");
  if (!code.has_value()) return "";
  std::optional<std::string> message = XmlText(body, "Message");
  return message.has_value() ? absl::StrCat(*code, ": ", *message) : *code;
}

}  // namespace

const char* HttpReason(long status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 416:
      return "Range Not Satisfiable";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

HttpClient::HttpClient(HttpOptions options) : options_(std::move(options)) {
  GlobalInit();
}

HttpClient::~HttpClient() {
  absl::MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::TakeHandle() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::ReturnHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  if (idle_.size() < 32) {
    idle_.push_back(handle);
    return;
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

absl::StatusOr<HttpResponse> HttpClient::Attempt(const HttpRequest& r,
                                                 bool* retryable) {
  *retryable = false;
  CURL* curl = static_cast<CURL*>(TakeHandle());
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_reset(curl);
  Transfer t;
  t.curl = curl;
  t.request = &r;
  char error[CURL_ERROR_SIZE] = {};
  struct curl_slist* headers = nullptr;
  for (const std::string& h : r.headers) {
    headers = curl_slist_append(headers, h.c_str());
  }
  std::string sigv4;
  if (r.sign.has_value() && !r.sign->credentials.empty()) {
    // libcurl takes the payload hash from this header (UNSIGNED-PAYLOAD:
    // the body is streamed, and each shard is checked by digest anyway).
    headers =
        curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!r.sign->credentials.session_token.empty()) {
      const std::string token = absl::StrCat("x-amz-security-token: ",
                                             r.sign->credentials.session_token);
      headers = curl_slist_append(headers, token.c_str());
    }
    sigv4 = absl::StrCat("aws:amz:", r.sign->region, ":", r.sign->service);
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME,
                     r.sign->credentials.access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD,
                     r.sign->credentials.secret_access_key.c_str());
  }
  std::string range;
  if (r.range_length > 0) {
    range =
        absl::StrCat(r.range_offset, "-", r.range_offset + r.range_length - 1);
  } else if (r.range_offset > 0) {
    range = absl::StrCat(r.range_offset, "-");  // To the end.
  }
  if (!range.empty()) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(
      curl, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>(std::max<int64_t>(
                       1, absl::ToInt64Seconds(options_.stall_timeout))));
  const bool has_body = r.body_fd >= 0 || !r.body.empty() ||
                        r.method == "PUT" || r.method == "POST";
  if (r.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (has_body) {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(r.body_fd >= 0 ? r.body_length
                                                            : r.body.size()));
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  } else if (r.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  const CURLcode code = curl_easy_perform(curl);
  t.response.status = Status(curl);
  curl_slist_free_all(headers);
  ReturnHandle(curl);

  const std::string what = absl::StrCat(r.method, " ", RedactUrl(r.url));
  if (!t.sink_error.ok()) {
    return absl::Status(t.sink_error.code(),
                        absl::StrCat(what, ": ", t.sink_error.message()));
  }
  if (t.range_ignored) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the server ignored the Range header (HTTP ",
                     t.response.status, " instead of 206)"));
  }
  if (code != CURLE_OK) {
    *retryable = IsRetryableCurlCode(code);
    return absl::UnavailableError(absl::StrCat(
        what, ": ", error[0] != '\0' ? error : curl_easy_strerror(code)));
  }
  if (r.range_length > 0 && t.response.status == 206 &&
      t.received != r.range_length) {
    *retryable = true;
    return absl::UnavailableError(absl::StrCat(what, ": got ", t.received,
                                               " bytes of the ", r.range_length,
                                               " asked for"));
  }
  if (t.response.body.empty()) t.response.body = std::move(t.error_body);
  return std::move(t.response);
}

absl::StatusOr<HttpResponse> HttpClient::Perform(const HttpRequest& r,
                                                 long accept_status) {
  thread_local std::minstd_rand rng(std::random_device{}());
  const int attempts = std::max(1, options_.retry.max_attempts);
  absl::Status last;
  int attempt = 1;
  for (;; ++attempt) {
    bool retryable = false;
    absl::StatusOr<HttpResponse> got = Attempt(r, &retryable);
    if (got.ok()) {
      const long status = got->status;
      if ((status >= 200 && status < 300) || status == accept_status) {
        return got;
      }
      retryable = IsRetryableStatus(status);
      const std::string detail = ErrorDetail(got->body);
      last = absl::Status(
          CodeFor(status),
          absl::StrCat(r.method, " ", RedactUrl(r.url), ": HTTP ", status,
                       *HttpReason(status) != '\0' ? " " : "",
                       HttpReason(status),
                       detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
    } else {
      last = got.status();
    }
    if (!retryable || attempt >= attempts) break;
    if (r.on_retry) r.on_retry(last);
    if (options_.on_retry) options_.on_retry(last);
    absl::SleepFor(
        RetryWait(options_.retry, attempt,
                  std::uniform_real_distribution<double>(0.0, 1.0)(rng)));
  }
  if (attempt > 1) {
    return absl::Status(last.code(), absl::StrCat(last.message(), " (after ",
                                                  attempt, " attempts)"));
  }
  return last;
}

}  // namespace stoker::storage
