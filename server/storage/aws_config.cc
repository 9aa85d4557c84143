#include "server/storage/aws_config.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/dataset/file_util.h"

namespace stoker::storage {

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

namespace {

std::string EnvGet(const EnvLookup& env, const char* name) {
  std::optional<std::string> v = env(name);
  return v.has_value() ? *v : "";
}

}  // namespace

absl::StatusOr<Credentials> ParseCredentialsFile(std::string_view text_in,
                                                 std::string_view profile_in,
                                                 std::string_view path_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view profile(profile_in.data(), profile_in.size());
  const absl::string_view path(path_in.data(), path_in.size());
  Credentials c;
  bool in_profile = false, found = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", line_no, ": a section header must end with ]"));
      }
      absl::string_view name =
          absl::StripAsciiWhitespace(line.substr(1, line.size() - 2));
      // ~/.aws/config writes [profile NAME]; credentials files write [NAME].
      absl::ConsumePrefix(&name, "profile ");
      in_profile = name == profile;
      found |= in_profile;
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no,
                       ": expected key = value, [profile] or a comment"));
    }
    if (!in_profile) continue;
    const std::string key =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (key == "aws_access_key_id") c.access_key_id = value;
    if (key == "aws_secret_access_key") c.secret_access_key = value;
    if (key == "aws_session_token") c.session_token = value;
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("profile '", profile, "' is not in ", path));
  }
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile '", profile, "' in ", path,
                     " lacks aws_access_key_id or aws_secret_access_key"));
  }
  return c;
}

S3Settings S3SettingsFromEnv(const EnvLookup& env) {
  S3Settings s;
  s.region = EnvGet(env, "AWS_REGION");
  if (s.region.empty()) s.region = EnvGet(env, "AWS_DEFAULT_REGION");
  if (s.region.empty()) s.region = "us-east-1";
  s.endpoint = EnvGet(env, "AWS_ENDPOINT_URL_S3");
  if (s.endpoint.empty()) s.endpoint = EnvGet(env, "AWS_ENDPOINT_URL");
  while (absl::EndsWith(s.endpoint, "/")) s.endpoint.pop_back();
  s.path_style = !s.endpoint.empty();
  return s;
}

CredentialsSource::CredentialsSource(EnvLookup env) : env_(std::move(env)) {}

absl::StatusOr<Credentials> CredentialsSource::Load() const {
  Credentials c;
  c.access_key_id = EnvGet(env_, "AWS_ACCESS_KEY_ID");
  c.secret_access_key = EnvGet(env_, "AWS_SECRET_ACCESS_KEY");
  if (!c.access_key_id.empty() && !c.secret_access_key.empty()) {
    c.session_token = EnvGet(env_, "AWS_SESSION_TOKEN");
    return c;
  }
  std::string path = EnvGet(env_, "AWS_SHARED_CREDENTIALS_FILE");
  const bool named = !path.empty() || env_("AWS_PROFILE").has_value();
  if (path.empty()) {
    const std::string home = EnvGet(env_, "HOME");
    if (home.empty()) return Credentials{};
    path = absl::StrCat(home, "/.aws/credentials");
  }
  std::string profile = EnvGet(env_, "AWS_PROFILE");
  if (profile.empty()) profile = "default";
  std::string text;
  if (absl::Status s = dataset::ReadFileToString(path, &text); !s.ok()) {
    if (!named && absl::IsNotFound(s)) return Credentials{};
    return absl::Status(
        s.code(), absl::StrCat("credentials file ", path, ": ", s.message()));
  }
  absl::StatusOr<Credentials> parsed =
      ParseCredentialsFile(text, profile, path);
  if (!parsed.ok() && absl::IsNotFound(parsed.status()) && !named) {
    return Credentials{};
  }
  return parsed;
}

absl::StatusOr<Credentials> CredentialsSource::Get() {
  absl::MutexLock lock(&mu_);
  if (!current_.has_value()) {
    absl::StatusOr<Credentials> c = Load();
    if (!c.ok()) return c.status();
    current_ = *std::move(c);
  }
  return *current_;
}

absl::StatusOr<bool> CredentialsSource::Reload() {
  absl::StatusOr<Credentials> c = Load();
  if (!c.ok()) return c.status();
  absl::MutexLock lock(&mu_);
  const bool changed = !current_.has_value() || !(*current_ == *c);
  current_ = *std::move(c);
  return changed;
}

}  // namespace stoker::storage
