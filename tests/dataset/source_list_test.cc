#include "server/dataset/source_list.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The (path relative to `root`, label) pairs of a listing.
std::vector<std::pair<std::string, int64_t>> Relative(
    const SourceListing& listing, const std::string& root) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const SourceFile& f : listing.files) {
    out.emplace_back(f.path.substr(root.size() + 1), f.label);
  }
  return out;
}

TEST(ImageFolderTest, LabelsBySortedClassAndSortsFilesWithinAClass) {
  testing::ScopedTempDir tmp;
  const std::string root = tmp.path();
  for (const char* f :
       {"zebra/b.jpg", "zebra/a.png", "ant/x/deep.jpg", "ant/y.jpg",
        "ant/.hidden.jpg", ".git/config", "ant/.cache/z.jpg"}) {
    ASSERT_TRUE(testing::WriteTestFile(root + "/" + f, "data").ok());
  }
  absl::StatusOr<SourceListing> listing = ListImageFolder(root);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_THAT(listing->classes, ElementsAre("ant", "zebra"));
  EXPECT_THAT(Relative(*listing, root),
              ElementsAre(std::pair<std::string, int64_t>{"ant/x/deep.jpg", 0},
                          std::pair<std::string, int64_t>{"ant/y.jpg", 0},
                          std::pair<std::string, int64_t>{"zebra/a.png", 1},
                          std::pair<std::string, int64_t>{"zebra/b.jpg", 1}));
  EXPECT_TRUE(listing->rejected.empty());
}

TEST(ImageFolderTest, RejectsFilesOutsideClassFolders) {
  testing::ScopedTempDir tmp;
  ASSERT_TRUE(testing::WriteTestFile(tmp.path() + "/cat/a.jpg", "x").ok());
  ASSERT_TRUE(testing::WriteTestFile(tmp.path() + "/README", "x").ok());
  absl::StatusOr<SourceListing> listing = ListImageFolder(tmp.path());
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->files.size(), 1u);
  ASSERT_EQ(listing->rejected.size(), 1u);
  EXPECT_EQ(listing->rejected[0].path, tmp.path() + "/README");
  EXPECT_EQ(listing->rejected[0].reason, "not inside a class folder");
}

TEST(ImageFolderTest, RefusesAClassFolderWithoutFilesNamingItAndItsLabel) {
  testing::ScopedTempDir tmp;
  const std::string root = tmp.path();
  ASSERT_TRUE(testing::WriteTestFile(root + "/cat/a.jpg", "x").ok());
  ASSERT_TRUE(testing::WriteTestFile(root + "/bird/.keep", "").ok());
  std::filesystem::create_directories(root + "/ant/sub");
  const absl::Status s = ListImageFolder(root).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("class folders 'ant' (label 0), 'bird' (label 1) in " +
                        root + " hold no files: a class without files would "
                        "take a label no sample has and shift the label of "
                        "every class after it by one"));
}

TEST(ImageFolderTest, ReturnsNotFoundForAMissingRoot) {
  EXPECT_EQ(ListImageFolder("/nonexistent/src").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ListFileTest, ResolvesRelativePathsAgainstTheListFileAndKeepsOrder) {
  testing::ScopedTempDir tmp;
  const std::string list = tmp.path() + "/lists/train.csv";
  ASSERT_TRUE(testing::WriteTestFile(list,
                                     "b.jpg,5\n"
                                     "\n"
                                     "# a comment\n"
                                     "sub/a,b.jpg , -2\r\n"
                                     "/abs/c.jpg,0\n")
                  .ok());
  absl::StatusOr<SourceListing> listing = ReadListFile(list);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_TRUE(listing->classes.empty());
  ASSERT_EQ(listing->files.size(), 3u);
  EXPECT_EQ(listing->files[0].path, tmp.path() + "/lists/b.jpg");
  EXPECT_EQ(listing->files[0].label, 5);
  EXPECT_EQ(listing->files[1].path, tmp.path() + "/lists/sub/a,b.jpg");
  EXPECT_EQ(listing->files[1].label, -2);
  EXPECT_EQ(listing->files[2].path, "/abs/c.jpg");
}

TEST(ListFileTest, BadLinesAreErrorsNamingFileAndLine) {
  testing::ScopedTempDir tmp;
  const std::string list = tmp.path() + "/list.txt";
  auto error = [&](const std::string& text) {
    EXPECT_TRUE(testing::WriteTestFile(list, text).ok());
    return ReadListFile(list).status().ToString();
  };
  EXPECT_EQ(error("a.jpg,1\n\nb.jpg,cat\n"),
            "INVALID_ARGUMENT: " + list + ":3: label 'cat' is not an integer");
  EXPECT_EQ(error("a.jpg\n"), "INVALID_ARGUMENT: " + list +
                                  ":1: expected 'path,label', got "
                                  "'a.jpg'");
  EXPECT_EQ(error("a.jpg,1\n ,2\n"),
            "INVALID_ARGUMENT: " + list + ":2: empty path");
}

TEST(ListFileTest, ReturnsNotFoundForAMissingListFile) {
  const absl::Status s = ReadListFile("/nonexistent/list.txt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/list.txt"));
}

}  // namespace
}  // namespace stoker::dataset
