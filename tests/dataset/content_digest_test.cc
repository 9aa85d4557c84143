#include "server/dataset/content_digest.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "server/dataset/file_util.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// Writes `m` as `dir`'s manifest.
void WriteManifestOf(const std::string& dir, const Manifest& m) {
  ASSERT_TRUE(
      testing::WriteTestFile(dir + "/" + kManifestFile, SerializeManifest(m))
          .ok());
}

TEST(ContentDigestTest, PackStoresTheDigestOfItsRecords) {
  testing::ScopedTempDir tmp;
  absl::StatusOr<std::string> dir =
      testing::MakeTestDataset(tmp.path(), 12, 3, 3, /*seed=*/1);
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<Manifest> m = ReadManifest(*dir);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->content_digest, MatchesRegex("[0-9a-f]{16}"));
  absl::StatusOr<std::string> computed = ComputeContentDigest(*dir, *m);
  ASSERT_TRUE(computed.ok()) << computed.status();
  EXPECT_EQ(*computed, m->content_digest);
  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::Open("d", *dir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->ContentDigest().value_or(""), m->content_digest);
}

TEST(ContentDigestTest, DependsOnTheRecordsNotOnTheSharding) {
  testing::ScopedTempDir one, four, other;
  auto a = testing::MakeTestDataset(one.path(), 12, 3, 1, /*seed=*/1);
  auto b = testing::MakeTestDataset(four.path(), 12, 3, 4, /*seed=*/1);
  auto c = testing::MakeTestDataset(other.path(), 12, 3, 1, /*seed=*/2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::string da = ReadManifest(*a)->content_digest;
  EXPECT_EQ(da, ReadManifest(*b)->content_digest);
  EXPECT_NE(da, ReadManifest(*c)->content_digest);
}

// Two typed datasets with records of the same sizes, so that their shard
// files are alike in size: the second has other labels.
class OtherRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TypedSamples samples = testing::MakeTypedSamples(20);
    ASSERT_TRUE(
        testing::WriteTypedDataset(a_, samples.schema, samples.records).ok());
    for (std::vector<std::string>& r : samples.records) {
      r[testing::kLabel][0] ^= 1;  // Another label, the same size.
    }
    ASSERT_TRUE(
        testing::WriteTypedDataset(b_, samples.schema, samples.records).ok());
  }

  testing::ScopedTempDir tmp_;
  const std::string a_ = tmp_.path() + "/a";
  const std::string b_ = tmp_.path() + "/b";
};

TEST_F(OtherRecordsTest, APackWithoutTheDigestGetsItFromItsRecords) {
  // WriteTypedDataset writes a manifest as pack did before the digest.
  absl::StatusOr<Manifest> m = ReadManifest(a_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->content_digest, "");
  EXPECT_THAT(SerializeManifest(*m), Not(HasSubstr("content_digest")));
  auto ds = Dataset::Open("a", a_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<std::string> digest = (*ds)->ContentDigest();
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, ComputeContentDigest(a_, *m).value_or(""));
  EXPECT_NE(*digest, ComputeContentDigest(b_, *m).value_or(""));
}

TEST_F(OtherRecordsTest, OtherRecordsUnderACopiedManifestAreFound) {
  Manifest m = *ReadManifest(a_);
  m.content_digest = *ComputeContentDigest(a_, m);
  WriteManifestOf(a_, m);
  WriteManifestOf(b_, m);  // a's manifest beside b's records.
  auto b = Dataset::Open("b", b_);
  ASSERT_TRUE(b.ok()) << b.status();  // Same sizes: it opens.
  absl::StatusOr<std::string> digest = (*b)->ContentDigest();
  EXPECT_EQ(digest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(digest.status().message(),
              HasSubstr("not the records it was packed with"));
  auto a = Dataset::Open("a", a_);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->ContentDigest().value_or(""), m.content_digest);
}

TEST_F(OtherRecordsTest, AManifestRefusesADigestThatIsNotSixteenHexDigits) {
  Manifest m = *ReadManifest(a_);
  m.content_digest = "xyz";
  absl::StatusOr<Manifest> parsed =
      ParseManifest(SerializeManifest(m), "m.json");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("content_digest"));
}

}  // namespace
}  // namespace stoker::dataset
