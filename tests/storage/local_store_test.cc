#include <fcntl.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "server/storage/store.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::storage {
namespace {

TEST(LocalStoreTest, StatsListsReadsRangesAndPutsWhole) {
  testing::ScopedTempDir tmp;
  absl::StatusOr<Location> loc = ParseLocation(tmp.path());
  ASSERT_TRUE(loc.ok());
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(*loc, {});
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("a.bin", "0123456789").ok());
  EXPECT_EQ((*store)->Stat("a.bin").value(), 10u);
  EXPECT_TRUE(absl::IsNotFound((*store)->Stat("b.bin").status()));
  EXPECT_EQ((*store)->Read("a.bin", 3, 4).value(), "3456");
  EXPECT_EQ((*store)->Read("a.bin", 0, 0).value(), "0123456789");
  EXPECT_TRUE(absl::IsOutOfRange((*store)->Read("a.bin", 8, 4).status()));

  const std::string out = tmp.path() + "/out";
  const int fd = ::open(out.c_str(), O_RDWR | O_CREAT, 0644);
  uint64_t counted = 0;
  ASSERT_TRUE(
      (*store)
          ->ReadToFile("a.bin", 2, 5, fd, 1, [&](uint64_t n) { counted += n; })
          .ok());
  ::close(fd);
  std::string got;
  ASSERT_TRUE(dataset::ReadFileToString(out, &got).ok());
  EXPECT_EQ(got, std::string("\0"
                             "23456",
                             6));
  EXPECT_EQ(counted, 5u);

  ASSERT_TRUE((*store)->PutFile("c.bin", out, nullptr).ok());
  absl::StatusOr<std::vector<ObjectInfo>> list = (*store)->List();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const ObjectInfo& o : *list) names.push_back(o.name);
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ::testing::ElementsAre("a.bin", "c.bin", "out"));
}

}  // namespace
}  // namespace stoker::storage
