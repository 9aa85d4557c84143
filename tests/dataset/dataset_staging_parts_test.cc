// A dataset served while it is staged shares the copy's part files
// (part_files.h): records read by range are written into them, what the
// copy wrote is read from them, a read beside a piece of the copy in flight
// waits for it or not by its size, and a record fetched ahead may bring its
// whole block.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "server/dataset/file_util.h"
#include "server/dataset/part_files.h"
#include "server/dataset/shard_index.h"
#include "tests/dataset/dataset_staging_fixture.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;
using staging_test::DatasetStagingTest;
using staging_test::FolderSource;
using staging_test::RecordBytes;

// Records read by range go into the staging copy's part file, and a range
// the copy (or a read) already wrote there is read from it, not the source.
TEST_F(DatasetStagingTest, RecordsAreSharedWithTheCopysPartFiles) {
  auto parts = std::make_shared<PartFiles>();
  std::vector<std::string> part_paths;
  for (const ShardInfo& s : manifest_.shards) {
    const std::string path = dest_ + "/" + s.file + ".part";
    fs::copy_file(source_ + "/" + s.file, path);
    fs::resize_file(path, 0);
    fs::resize_file(path, s.bytes);
    ASSERT_TRUE(parts->Open(s.file, path).ok());
    part_paths.push_back(path);
  }
  std::vector<ShardIndex> indexes;
  for (const ShardInfo& s : manifest_.shards) {
    std::string text;
    ASSERT_TRUE(ReadFileToString(source_ + "/" + s.index_file, &text).ok());
    indexes.push_back(ParseShardIndex(text, s.index_file).value());
  }
  RemoteOptions options;
  options.parts = parts;
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_), options);
  ASSERT_NE(ds, nullptr);

  // A record of shard 1 read from the source is written at its offset.
  const ShardInfo& s1 = manifest_.shards[1];
  const uint64_t id = s1.first_id + 1;
  EXPECT_EQ(RecordBytes(*ds, id), RecordBytes(*local_, id));
  EXPECT_EQ(ds->remote_stats().requests, 1u);
  const RecordRange r = indexes[1].records[1];
  std::string shard1;
  ASSERT_TRUE(ReadFileToString(source_ + "/" + s1.file, &shard1).ok());
  EXPECT_EQ(parts->Read(s1.file, r.offset, r.length),
            shard1.substr(r.offset, r.length));
  EXPECT_THAT(parts->Missing(s1.file, r.offset, r.length, 0),
              ::testing::IsEmpty());

  // Shard 0 as the copy writes it: its records come from the part file.
  const ShardInfo& s0 = manifest_.shards[0];
  fs::copy_file(source_ + "/" + s0.file, part_paths[0],
                fs::copy_options::overwrite_existing);
  parts->MarkPresent(s0.file, 0, s0.bytes);
  for (uint64_t i = 0; i < s0.num_samples; ++i) {
    EXPECT_EQ(RecordBytes(*ds, s0.first_id + i),
              RecordBytes(*local_, s0.first_id + i));
  }
  EXPECT_EQ(ds->remote_stats().requests, 1u);
  EXPECT_GT(ds->remote_stats().local_bytes, 0u);

  // A bad range in the part file fails the record's check: it is read
  // from the source, and the good bytes replace the bad ones.
  const ShardInfo& s2 = manifest_.shards[2];
  const RecordRange r2 = indexes[2].records[0];
  ASSERT_TRUE(parts->Write(s2.file, r2.offset, std::string(r2.length, 'x')));
  EXPECT_EQ(RecordBytes(*ds, s2.first_id), RecordBytes(*local_, s2.first_id));
  EXPECT_EQ(ds->remote_stats().requests, 2u);
  std::string shard2;
  ASSERT_TRUE(ReadFileToString(source_ + "/" + s2.file, &shard2).ok());
  EXPECT_EQ(parts->Read(s2.file, r2.offset, r2.length),
            shard2.substr(r2.offset, r2.length));
}

// Shard `s`'s part file in `parts`, created at its size with nothing in it.
void OpenEmptyPart(PartFiles& parts, const std::string& source,
                   const std::string& dest, const ShardInfo& s) {
  const std::string path = dest + "/" + s.file + ".part";
  fs::copy_file(source + "/" + s.file, path);
  fs::resize_file(path, 0);
  fs::resize_file(path, s.bytes);
  ASSERT_TRUE(parts.Open(s.file, path).ok());
}

TEST_F(DatasetStagingTest, ARecordInALargePieceInFlightIsFetchedNotWaitedFor) {
  auto parts = std::make_shared<PartFiles>();
  const ShardInfo& s1 = manifest_.shards[1];
  OpenEmptyPart(*parts, source_, dest_, s1);
  RemoteOptions options;
  options.parts = parts;
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_), options);
  ASSERT_NE(ds, nullptr);
  // The copy has the whole shard, many records, in flight and never
  // finishes: a read that waited for it would not return.
  const std::vector<RangeSet::Range> claim =
      parts->Claim(s1.file, 0, s1.bytes, 0);
  ASSERT_EQ(claim.size(), 1u);
  const uint64_t id = s1.first_id + 2;
  EXPECT_EQ(RecordBytes(*ds, id), RecordBytes(*local_, id));
  EXPECT_EQ(ds->remote_stats().requests, 1u);
  EXPECT_EQ(ds->remote_stats().local_bytes, 0u);
  parts->Release(s1.file, claim, /*written=*/false);
}

TEST_F(DatasetStagingTest, ARecordInASmallPieceInFlightWaitsForIt) {
  auto parts = std::make_shared<PartFiles>();
  const ShardInfo& s1 = manifest_.shards[1];
  OpenEmptyPart(*parts, source_, dest_, s1);
  std::string text;
  ASSERT_TRUE(ReadFileToString(source_ + "/" + s1.index_file, &text).ok());
  const RecordRange r =
      ParseShardIndex(text, s1.index_file).value().records[2];
  RemoteOptions options;
  options.parts = parts;
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_), options);
  ASSERT_NE(ds, nullptr);
  // The copy's piece is the record itself: the read waits for it, and
  // reads what the copy wrote instead of fetching it.
  const std::vector<RangeSet::Range> claim =
      parts->Claim(s1.file, r.offset, r.length, 0);
  ASSERT_EQ(claim.size(), 1u);
  const uint64_t id = s1.first_id + 2;
  std::string got;
  std::thread reader([&] { got = RecordBytes(*ds, id); });
  std::string shard;
  ASSERT_TRUE(ReadFileToString(source_ + "/" + s1.file, &shard).ok());
  {
    std::fstream f(dest_ + "/" + s1.file + ".part",
                   std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(r.offset);
    f.write(shard.data() + r.offset, r.length);
  }
  parts->Release(s1.file, claim, /*written=*/true);
  reader.join();
  EXPECT_EQ(got, RecordBytes(*local_, id));
  EXPECT_EQ(ds->remote_stats().requests, 0u);
  EXPECT_EQ(ds->remote_stats().local_bytes, r.length);
}

TEST_F(DatasetStagingTest, ARecordFetchedAheadBringsItsBlockIntoThePartFile) {
  auto parts = std::make_shared<PartFiles>();
  for (const ShardInfo& s : manifest_.shards) {
    OpenEmptyPart(*parts, source_, dest_, s);
  }
  constexpr uint64_t kBlock = 64 << 10;
  RemoteOptions options;
  options.parts = parts;
  options.block_bytes = kBlock;
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_), options);
  ASSERT_NE(ds, nullptr);
  std::string text;
  const ShardInfo& s1 = manifest_.shards[1];
  ASSERT_TRUE(ReadFileToString(source_ + "/" + s1.index_file, &text).ok());
  const ShardIndex index = ParseShardIndex(text, s1.index_file).value();
  const RecordRange& r = index.records[0];
  const uint64_t begin = r.offset / kBlock * kBlock;
  const uint64_t end =
      std::min(s1.bytes, (r.offset + r.length + kBlock - 1) / kBlock * kBlock);
  const std::vector<uint64_t> first = {s1.first_id};
  ds->Prefetch(first);
  EXPECT_EQ(RecordBytes(*ds, s1.first_id), RecordBytes(*local_, s1.first_id));
  EXPECT_EQ(ds->remote_stats().requests, 1u);
  EXPECT_GE(ds->remote_stats().bytes, end - begin);
  EXPECT_THAT(parts->Missing(s1.file, begin, end - begin, 0),
              ::testing::IsEmpty());
  // Another record inside that block: read from the part file, no GET.
  size_t other = 0;
  for (size_t i = 1; i < index.records.size(); ++i) {
    const RecordRange& o = index.records[i];
    if (o.offset >= begin && o.offset + o.length <= end) other = i;
  }
  ASSERT_NE(other, 0u) << "no second record in the first block";
  const std::vector<uint64_t> second = {s1.first_id + other};
  ds->Prefetch(second);
  EXPECT_EQ(RecordBytes(*ds, s1.first_id + other),
            RecordBytes(*local_, s1.first_id + other));
  EXPECT_EQ(ds->remote_stats().requests, 1u);

  // An urgent record (the batch being built) is fetched alone.
  const ShardInfo& s2 = manifest_.shards[2];
  const uint64_t before = ds->remote_stats().bytes;
  const std::vector<uint64_t> urgent = {s2.first_id + 1};
  ds->Prefetch(urgent, /*urgent=*/true);
  EXPECT_EQ(RecordBytes(*ds, s2.first_id + 1),
            RecordBytes(*local_, s2.first_id + 1));
  EXPECT_EQ(ds->remote_stats().requests, 2u);
  EXPECT_LT(ds->remote_stats().bytes - before, s2.bytes);
}

}  // namespace
}  // namespace stoker::dataset
