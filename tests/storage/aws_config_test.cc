#include "server/storage/aws_config.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

constexpr char kFile[] = R"(# comment
[default]
aws_access_key_id = AKDEFAULT
aws_secret_access_key = s3cr3t-default

[profile ci]
aws_access_key_id=AKCI
aws_secret_access_key=s3cr3t-ci
aws_session_token = tok-ci
; another comment
[broken]
aws_access_key_id = AKBROKEN
)";

TEST(CredentialsFileTest, ReadsTheNamedProfile) {
  absl::StatusOr<Credentials> d = ParseCredentialsFile(kFile, "default", "f");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->access_key_id, "AKDEFAULT");
  EXPECT_EQ(d->secret_access_key, "s3cr3t-default");
  EXPECT_EQ(d->session_token, "");
  absl::StatusOr<Credentials> ci = ParseCredentialsFile(kFile, "ci", "f");
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->access_key_id, "AKCI");
  EXPECT_EQ(ci->session_token, "tok-ci");
}

TEST(CredentialsFileTest, ErrorsNameTheProfileAndLineButNoSecret) {
  EXPECT_EQ(ParseCredentialsFile(kFile, "nope", "/c").status().ToString(),
            "NOT_FOUND: profile 'nope' is not in /c");
  const absl::Status broken =
      ParseCredentialsFile(kFile, "broken", "/c").status();
  EXPECT_THAT(broken.message(), HasSubstr("lacks aws_access_key_id or "
                                          "aws_secret_access_key"));
  EXPECT_THAT(broken.message(), Not(HasSubstr("AKBROKEN")));
  const absl::Status bad =
      ParseCredentialsFile("[a]\nsecret s3cr3t\n", "a", "/c").status();
  EXPECT_EQ(bad.ToString(),
            "INVALID_ARGUMENT: /c:2: expected key = value, [profile] or a "
            "comment");
}

TEST(CredentialsSourceTest, PrefersTheEnvironmentThenTheFile) {
  testing::ScopedTempDir tmp;
  const std::string file = tmp.path() + "/credentials";
  ASSERT_TRUE(testing::WriteTestFile(file, kFile).ok());
  CredentialsSource env(Env({{"AWS_ACCESS_KEY_ID", "AKENV"},
                             {"AWS_SECRET_ACCESS_KEY", "x"},
                             {"AWS_SESSION_TOKEN", "t"},
                             {"AWS_SHARED_CREDENTIALS_FILE", file}}));
  EXPECT_EQ(env.Get()->access_key_id, "AKENV");
  EXPECT_EQ(env.Get()->session_token, "t");
  CredentialsSource profile(
      Env({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "ci"}}));
  EXPECT_EQ(profile.Get()->access_key_id, "AKCI");
  CredentialsSource home(Env({{"HOME", tmp.path() + "/nohome"}}));
  EXPECT_TRUE(home.Get()->empty());  // Anonymous.
  CredentialsSource missing(
      Env({{"AWS_SHARED_CREDENTIALS_FILE", tmp.path() + "/none"}}));
  EXPECT_TRUE(absl::IsNotFound(missing.Get().status()));
}

TEST(CredentialsSourceTest, ReloadReadsARotatedFile) {
  testing::ScopedTempDir tmp;
  const std::string file = tmp.path() + "/credentials";
  ASSERT_TRUE(testing::WriteTestFile(file, kFile).ok());
  CredentialsSource source(Env({{"AWS_SHARED_CREDENTIALS_FILE", file}}));
  EXPECT_EQ(source.Get()->access_key_id, "AKDEFAULT");
  EXPECT_EQ(*source.Reload(), false);
  ASSERT_TRUE(testing::WriteTestFile(file,
                                     "[default]\naws_access_key_id=AKNEW\n"
                                     "aws_secret_access_key=new\n")
                  .ok());
  EXPECT_EQ(source.Get()->access_key_id, "AKDEFAULT");  // Until reloaded.
  EXPECT_EQ(*source.Reload(), true);
  EXPECT_EQ(source.Get()->access_key_id, "AKNEW");
}

TEST(S3SettingsTest, RegionAndEndpointFollowTheAwsVariables) {
  S3Settings aws = S3SettingsFromEnv(Env({}));
  EXPECT_EQ(aws.region, "us-east-1");
  EXPECT_FALSE(aws.path_style);
  S3Settings s = S3SettingsFromEnv(Env({{"AWS_DEFAULT_REGION", "eu-west-1"},
                                        {"AWS_ENDPOINT_URL", "http://a:9/"}}));
  EXPECT_EQ(s.region, "eu-west-1");
  EXPECT_EQ(s.endpoint, "http://a:9");
  EXPECT_TRUE(s.path_style);
  S3Settings both =
      S3SettingsFromEnv(Env({{"AWS_REGION", "r1"},
                             {"AWS_DEFAULT_REGION", "r2"},
                             {"AWS_ENDPOINT_URL", "http://a"},
                             {"AWS_ENDPOINT_URL_S3", "http://b"}}));
  EXPECT_EQ(both.region, "r1");
  EXPECT_EQ(both.endpoint, "http://b");
}

}  // namespace
}  // namespace stoker::storage
