// AWS credentials, region and endpoint, found the way the AWS CLI and SDKs
// find them, so a node that can run `aws s3 cp` can pull:
//
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
//                (+ AWS_SESSION_TOKEN) from the environment; else the
//                profile AWS_PROFILE ("default" if unset) of the shared
//                credentials file
//                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials if unset);
//                else none (anonymous requests, for public buckets).
//   region       AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
//   endpoint     AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL: then requests
//                go to ENDPOINT/BUCKET/KEY (path-style, which MinIO, Ceph
//                RGW and test servers need); else virtual-hosted AWS,
//                https://BUCKET.s3.REGION.amazonaws.com/KEY.
//
// CredentialsSource re-reads the file when asked (a request refused as
// expired), so rotated temporary credentials keep working.
//
// Thread-safe: CredentialsSource is (guarded by a mutex); the functions are
// pure.
#ifndef STOKER_SERVER_STORAGE_AWS_CONFIG_H_
#define STOKER_SERVER_STORAGE_AWS_CONFIG_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace stoker::storage {

// Reads an environment variable; nullopt when unset. Tests inject a map.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;
EnvLookup ProcessEnv();

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;  // Never logged nor put in a message.
  std::string session_token;      // Empty if none. Secret too.

  bool empty() const { return access_key_id.empty(); }
  bool operator==(const Credentials& o) const {
    return access_key_id == o.access_key_id &&
           secret_access_key == o.secret_access_key &&
           session_token == o.session_token;
  }
};

// Parses the INI text of a shared credentials file and returns `profile`'s
// aws_access_key_id, aws_secret_access_key and aws_session_token. NotFound
// naming the profile and `path` if it is not there; InvalidArgument naming
// the line for a line that is neither a [section], a key = value, a comment
// nor blank, and for a profile without both keys. Messages never quote a
// value.
absl::StatusOr<Credentials> ParseCredentialsFile(std::string_view text,
                                                 std::string_view profile,
                                                 std::string_view path);

struct S3Settings {
  std::string region;
  std::string endpoint;  // Without a trailing slash; empty: AWS.
  bool path_style = false;
};

S3Settings S3SettingsFromEnv(const EnvLookup& env);

// The credentials of one process: environment or file, as above.
class CredentialsSource {
 public:
  explicit CredentialsSource(EnvLookup env);

  // The credentials now; loads them on the first call. An error only if a
  // file named by AWS_SHARED_CREDENTIALS_FILE or AWS_PROFILE cannot give
  // them; none at all is an empty Credentials.
  absl::StatusOr<Credentials> Get() ABSL_LOCKS_EXCLUDED(mu_);

  // Loads them again (after a request was refused as expired). Returns
  // whether they changed.
  absl::StatusOr<bool> Reload() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::StatusOr<Credentials> Load() const;

  const EnvLookup env_;
  absl::Mutex mu_;
  std::optional<Credentials> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_AWS_CONFIG_H_
