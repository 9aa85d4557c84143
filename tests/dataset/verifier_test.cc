#include "server/dataset/verifier.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 12, 3, 3, 5);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }

  testing::ScopedTempDir tmp_;
  std::string dir_;
};

TEST_F(VerifierTest, FindsNothingWrongWithASoundDataset) {
  PackProgress last;
  absl::StatusOr<VerifyReport> report = Verify(
      dir_, [&](const PackProgress& p) { last = p; }, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->errors.empty());
  EXPECT_EQ(report->records, 12u);
  EXPECT_GT(report->bytes, 12u * 500);
  EXPECT_EQ(last.phase, "verify");
  EXPECT_EQ(last.done, 12u);
  EXPECT_EQ(last.bytes, report->bytes);
}

TEST_F(VerifierTest, ReportsACorruptRecordByShardAndKey) {
  ASSERT_TRUE(testing::CorruptRecordOnDisk(dir_, 5).ok());
  absl::StatusOr<VerifyReport> report = Verify(dir_, nullptr, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  // The shard's digest catches it too; the records say which one.
  EXPECT_THAT(report->errors,
              ElementsAre(HasSubstr("shard-00001.lmdb: digest is"),
                          "shard-00001.lmdb, key 5: checksum mismatch"));
  EXPECT_EQ(report->records, 11u);
}

TEST_F(VerifierTest, ReportsAMissingShardAndChecksTheOthers) {
  std::filesystem::remove(dir_ + "/shard-00002.lmdb");
  absl::StatusOr<VerifyReport> report = Verify(dir_, nullptr, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->errors.size(), 1u);
  EXPECT_THAT(report->errors[0], HasSubstr("shard-00002.lmdb: No such file"));
  EXPECT_EQ(report->records, 8u);
}

TEST_F(VerifierTest, RunsValidateOnEveryImageWhenGiven) {
  absl::StatusOr<VerifyReport> report =
      Verify(dir_, nullptr, [](std::string_view bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("rejected ", bytes.substr(0, 2) == "\xff\xd8"));
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->records, 0u);
  EXPECT_EQ(report->errors.size(), 12u);
  EXPECT_THAT(report->errors, Each(HasSubstr("field 'image': rejected 1")));
  EXPECT_EQ(report->errors[0],
            "shard-00000.lmdb, key 0: field 'image': rejected 1");
}

TEST(TypedVerifierTest, ChecksEveryValueAsPackDoes) {
  testing::ScopedTempDir tmp;
  const std::vector<FieldSpec> schema = {
      MakeFieldSpec("caption", "str").value(),
      MakeArraySpec("mask", tensor::DType::kBool, {2}).value(),
      MakeFieldSpec("label", "int64").value()};
  const std::string label(8, '\0');
  ASSERT_TRUE(
      testing::WriteTypedDataset(tmp.path() + "/d", schema,
                                 {{"good", std::string("\1\0", 2), label},
                                  {"caf\xe9", std::string("\1\0", 2), label},
                                  {"good", "\1\2", label},
                                  {"good", "\1", label}})
          .ok());
  // No image field, so the image check never runs.
  absl::StatusOr<VerifyReport> report =
      Verify(tmp.path() + "/d", nullptr,
             [](std::string_view) -> absl::StatusOr<std::string> {
               return absl::InternalError("not an image field");
             });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->records, 1u);
  EXPECT_THAT(
      report->errors,
      ElementsAre("shard-00000.lmdb, key 1: field 'caption': not UTF-8 at "
                  "byte 3 of 4 (a str must be UTF-8; store other text as "
                  "bytes)",
                  "shard-00000.lmdb, key 2: field 'mask': byte 1 is 2; a bool "
                  "is 0 or 1",
                  "shard-00000.lmdb, key 3: field 'mask' has 1 bytes, bool "
                  "[2] needs 2"));
}

TEST_F(VerifierTest, ReturnsNotFoundWithoutAManifest) {
  EXPECT_EQ(Verify(tmp_.path(), nullptr, nullptr).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoker::dataset
