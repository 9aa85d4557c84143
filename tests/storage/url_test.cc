#include "server/storage/url.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LocationTest, ParsesS3BucketAndPrefix) {
  absl::StatusOr<Location> l = ParseLocation("s3://data/packs/imagenet/");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->kind, Location::Kind::kS3);
  EXPECT_EQ(l->bucket, "data");
  EXPECT_EQ(l->prefix, "packs/imagenet");
  EXPECT_EQ(l->Key("manifest.json"), "packs/imagenet/manifest.json");
  EXPECT_EQ(l->Display(), "s3://data/packs/imagenet");
  absl::StatusOr<Location> bare = ParseLocation("s3://data");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->Key("a.lmdb"), "a.lmdb");
}

TEST(LocationTest, ParsesHttpAndLocalPaths) {
  absl::StatusOr<Location> h = ParseLocation("https://host:8443/d/train/");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->kind, Location::Kind::kHttp);
  EXPECT_EQ(h->Key("shard 1.lmdb"), "https://host:8443/d/train/shard%201.lmdb");
  absl::StatusOr<Location> p = ParseLocation("/mnt/nfs/train/");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, Location::Kind::kLocal);
  EXPECT_EQ(p->Key("manifest.json"), "/mnt/nfs/train/manifest.json");
}

TEST(LocationTest, RefusesCredentialsQueriesAndOtherSchemes) {
  const absl::Status user = ParseLocation("https://me:hunter2@h/d").status();
  EXPECT_TRUE(absl::IsInvalidArgument(user));
  EXPECT_THAT(user.message(), Not(HasSubstr("hunter2")));
  const absl::Status query =
      ParseLocation("https://h/d?X-Amz-Signature=sekrit").status();
  EXPECT_THAT(query.message(), HasSubstr("query"));
  EXPECT_THAT(query.message(), Not(HasSubstr("sekrit")));
  EXPECT_THAT(ParseLocation("gs://b/p").status().message(),
              HasSubstr("scheme 'gs' is not one of s3, http, https"));
  EXPECT_FALSE(ParseLocation("s3:///p").ok());
  EXPECT_FALSE(ParseLocation("").ok());
}

TEST(UrlTest, EncodesAsSigV4AndRedactsSecrets) {
  EXPECT_EQ(UriEncode("a b/c~d_e.f-g+h=", false), "a%20b%2Fc~d_e.f-g%2Bh%3D");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
  EXPECT_EQ(RedactUrl("https://u:p@h:1/x?sig=1#f"), "https://h:1/x");
  EXPECT_EQ(RedactUrl("http://h/x"), "http://h/x");
}

}  // namespace
}  // namespace stoker::storage
