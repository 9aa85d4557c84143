// Where a dataset is kept: a location parsed from the text a user writes,
// `s3://BUCKET/PREFIX`, `http(s)://HOST[:PORT]/PATH` or a local path (a
// mount), and the URLs and keys of the files inside it.
//
// Thread-safe: every function is pure.
#ifndef STOKER_SERVER_STORAGE_URL_H_
#define STOKER_SERVER_STORAGE_URL_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace stoker::storage {

struct Location {
  enum class Kind { kLocal, kHttp, kS3 };
  Kind kind = Kind::kLocal;
  // kLocal: the folder. kHttp: the URL of the folder, without a trailing
  // slash, query or fragment. kS3: unused.
  std::string base;
  std::string bucket;  // kS3 only.
  std::string prefix;  // kS3 only: the key prefix, without slashes at ends.

  // The key (S3) or path/URL (local, HTTP) of file `name` in the location.
  std::string Key(std::string_view name) const;
  // How the location is shown in messages: never credentials (a URL's user
  // and password, its query), which ParseLocation drops anyway.
  std::string Display() const;
};

// Parses `text`. InvalidArgument for an empty text, an s3:// URL without a
// bucket, an http(s) URL without a host, a URL with a user or password in
// it, a query or a fragment, or any other scheme (naming it).
absl::StatusOr<Location> ParseLocation(std::string_view text);

// Percent-encodes `s` as SigV4 canonical requests do: every byte but
// A-Z a-z 0-9 - _ . ~ as %XX (upper case), and '/' too unless `keep_slash`.
std::string UriEncode(std::string_view s, bool keep_slash);

// `url` without what may carry a secret: user info and the query.
std::string RedactUrl(std::string_view url);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_URL_H_
