#include "server/storage/part_journal.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class PartJournalTest : public ::testing::Test {
 protected:
  testing::ScopedTempDir tmp_;
  const std::string path_ = tmp_.path() + "/f.part.ranges";
  const std::string key_ = PartJournal::KeyOf("xxh3-128:ab", "{}");
};

TEST_F(PartJournalTest, LoadsTheRangesAdded) {
  {
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Create(path_, 1000, key_);
    ASSERT_TRUE(j.ok()) << j.status();
    ASSERT_TRUE((*j)->Add(0, 100).ok());
    ASSERT_TRUE((*j)->Add(200, 300).ok());
    ASSERT_TRUE((*j)->Add(100, 150).ok());
  }
  absl::StatusOr<dataset::RangeSet> r = PartJournal::Load(path_, 1000, key_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->runs(), ElementsAre(Pair(0, 150), Pair(200, 300)));
  // Reopened, it keeps them and takes more.
  {
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Reopen(path_, 1000, key_);
    ASSERT_TRUE(j.ok()) << j.status();
    ASSERT_TRUE((*j)->Add(900, 1000).ok());
  }
  r = PartJournal::Load(path_, 1000, key_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes(), 350u);
}

TEST_F(PartJournalTest, ResetForgetsEveryRange) {
  absl::StatusOr<std::unique_ptr<PartJournal>> j =
      PartJournal::Create(path_, 1000, key_);
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE((*j)->Add(0, 100).ok());
  ASSERT_TRUE((*j)->Reset().ok());
  ASSERT_TRUE((*j)->Add(500, 600).ok());
  absl::StatusOr<dataset::RangeSet> r = PartJournal::Load(path_, 1000, key_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->runs(), ElementsAre(Pair(500, 600)));
}

TEST_F(PartJournalTest, NoJournalIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(PartJournal::Load(path_, 10, key_).status()));
}

TEST_F(PartJournalTest, ATornOrDamagedJournalIsDataLoss) {
  {
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Create(path_, 1000, key_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE((*j)->Add(0, 100).ok());
  }
  std::string whole;
  {
    std::ifstream in(path_);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto load_of = [&](const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
    return PartJournal::Load(path_, 1000, key_).status();
  };
  // Half a line at the end.
  absl::Status s = load_of(whole + "100 2");
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("torn"));
  // A whole line whose check does not match (a changed digit).
  std::string changed = whole;
  changed[changed.find("\n0 100") + 3] = '2';
  s = load_of(changed);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  // A header cut short, or none.
  EXPECT_TRUE(absl::IsDataLoss(load_of("stoker-part-ran")));
  EXPECT_TRUE(absl::IsDataLoss(load_of("")));
  EXPECT_TRUE(absl::IsDataLoss(load_of("garbage\n")));
  EXPECT_TRUE(load_of(whole).ok());
}

TEST_F(PartJournalTest, ARangeOutsideTheFileIsDataLoss) {
  {
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Create(path_, 1000, key_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE((*j)->Add(900, 1001).ok());
  }
  absl::Status s = PartJournal::Load(path_, 1000, key_).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("names bytes 900-1001 of a file of 1000"));
}

TEST_F(PartJournalTest, AJournalOfAnotherFileIsFailedPrecondition) {
  {
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Create(path_, 1000, key_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE((*j)->Add(0, 100).ok());
  }
  const std::string other = PartJournal::KeyOf("xxh3-128:cd", "{}");
  absl::Status s = PartJournal::Load(path_, 1000, other).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("another version"));
  s = PartJournal::Load(path_, 999, key_).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
}

TEST_F(PartJournalTest, KeysTellFilesApart) {
  EXPECT_NE(PartJournal::KeyOf("xxh3-128:ab", "{}"),
            PartJournal::KeyOf("xxh3-128:cd", "{}"));
  // Without a digest, the manifest tells them apart.
  EXPECT_NE(PartJournal::KeyOf("", "{\"a\": 1}"),
            PartJournal::KeyOf("", "{\"a\": 2}"));
  EXPECT_EQ(PartJournal::KeyOf("", "{}"), PartJournal::KeyOf("", "{}"));
}

}  // namespace
}  // namespace stoker::storage
