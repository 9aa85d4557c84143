#include "server/storage/url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace stoker::storage {
namespace {

absl::string_view TrimSlashes(absl::string_view s) {
  while (absl::ConsumePrefix(&s, "/")) {
  }
  while (absl::ConsumeSuffix(&s, "/")) {
  }
  return s;
}

}  // namespace

std::string Location::Key(std::string_view name) const {
  const absl::string_view n(name.data(), name.size());
  switch (kind) {
    case Kind::kS3:
      return prefix.empty() ? std::string(n) : absl::StrCat(prefix, "/", n);
    case Kind::kHttp:
      return absl::StrCat(
          base, "/",
          UriEncode(std::string_view(n.data(), n.size()), /*keep_slash=*/true));
    case Kind::kLocal:
      break;
  }
  return absl::StrCat(base, "/", n);
}

std::string Location::Display() const {
  if (kind != Kind::kS3) return base;
  return prefix.empty() ? absl::StrCat("s3://", bucket)
                        : absl::StrCat("s3://", bucket, "/", prefix);
}

absl::StatusOr<Location> ParseLocation(std::string_view text_in) {
  absl::string_view text(text_in.data(), text_in.size());
  if (text.empty()) return absl::InvalidArgumentError("empty location");
  Location loc;
  const size_t scheme_end = text.find("://");
  if (scheme_end == absl::string_view::npos) {
    loc.kind = Location::Kind::kLocal;
    loc.base = std::string(text);
    while (loc.base.size() > 1 && loc.base.back() == '/') loc.base.pop_back();
    return loc;
  }
  const std::string scheme = absl::AsciiStrToLower(text.substr(0, scheme_end));
  absl::string_view rest = text.substr(scheme_end + 3);
  const size_t host_end = rest.find('/');
  const absl::string_view host = rest.substr(0, host_end);
  if (host.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "location ", scheme, "://", host.substr(host.find('@') + 1),
        "...: a user or password in the URL is refused; use the "
        "environment or a credentials file"));
  }
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "location ", RedactUrl(std::string_view(text.data(), text.size())),
        ": a query or fragment is refused"));
  }
  if (scheme == "s3") {
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("location ", text, ": no bucket"));
    }
    loc.kind = Location::Kind::kS3;
    loc.bucket = std::string(host);
    loc.prefix = host_end == absl::string_view::npos
                     ? ""
                     : std::string(TrimSlashes(rest.substr(host_end)));
    return loc;
  }
  if (scheme == "http" || scheme == "https") {
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("location ", text, ": no host"));
    }
    loc.kind = Location::Kind::kHttp;
    loc.base = absl::StrCat(scheme, "://", rest);
    while (absl::EndsWith(loc.base, "/")) loc.base.pop_back();
    return loc;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "location ", RedactUrl(std::string_view(text.data(), text.size())),
      ": scheme '", scheme,
      "' is not one of s3, http, https (or a local path)"));
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
        c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::string RedactUrl(std::string_view url_in) {
  absl::string_view url(url_in.data(), url_in.size());
  url = url.substr(0, url.find_first_of("?#"));
  const size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return std::string(url);
  const size_t host_start = scheme_end + 3;
  const size_t path_start = url.find('/', host_start);
  const absl::string_view authority =
      url.substr(host_start, path_start == absl::string_view::npos
                                 ? absl::string_view::npos
                                 : path_start - host_start);
  const size_t at = authority.rfind('@');
  if (at == absl::string_view::npos) return std::string(url);
  return absl::StrCat(
      url.substr(0, host_start), authority.substr(at + 1),
      path_start == absl::string_view::npos ? "" : url.substr(path_start));
}

}  // namespace stoker::storage
