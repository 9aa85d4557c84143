// A dataset served while it is staged: records of shards not local yet are
// read by range from a real source (a local Store over a folder holding the
// pack), checked, cached within a bound, prefetched in coalesced GETs, and
// read from the local file once a shard is published.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "server/dataset/file_util.h"
#include "server/dataset/part_files.h"
#include "server/dataset/shard_index.h"
#include "server/storage/store_ranges.h"
#include "server/storage/url.h"
#include "tests/dataset/dataset_staging_fixture.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using staging_test::DatasetStagingTest;
using staging_test::FolderSource;
using staging_test::GatedSource;
using staging_test::RecordBytes;

TEST_F(DatasetStagingTest, RemoteRecordsAreTheLocalPacksBytes) {
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_));
  ASSERT_NE(ds, nullptr);
  EXPECT_TRUE(ds->staging());
  for (uint64_t id = 0; id < manifest_.num_samples; ++id) {
    ReadInfo info;
    EXPECT_EQ(RecordBytes(*ds, id, &info), RecordBytes(*local_, id)) << id;
    EXPECT_TRUE(info.from_source);
    EXPECT_GT(info.bytes, 0u);
  }
  EXPECT_EQ(ds->remote_stats().records, manifest_.num_samples);
  EXPECT_EQ(ds->remote_stats().refetches, 0u);
  // The digest needs every shard local.
  EXPECT_EQ(ds->ContentDigest().status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(DatasetStagingTest, PublishedShardIsReadFromItsLocalFile) {
  CopyShard(0);  // Local from the start.
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_));
  ASSERT_NE(ds, nullptr);
  const uint64_t in1 = manifest_.shards[1].first_id;
  const uint64_t in2 = manifest_.shards[2].first_id;
  ReadInfo info;
  RecordBytes(*ds, 0, &info);
  EXPECT_FALSE(info.from_source);
  RecordBytes(*ds, in1, &info);
  EXPECT_TRUE(info.from_source);

  CopyShard(1);
  ASSERT_TRUE(ds->PublishShard(manifest_.shards[1].file).ok());
  ASSERT_TRUE(ds->PublishShard(manifest_.shards[1].index_file).ok());
  const uint64_t requests = ds->remote_stats().requests;
  info = ReadInfo();
  EXPECT_EQ(RecordBytes(*ds, in1, &info), RecordBytes(*local_, in1));
  EXPECT_FALSE(info.from_source);
  EXPECT_EQ(ds->remote_stats().requests, requests);
  EXPECT_TRUE(ds->staging());

  CopyShard(2);
  ASSERT_TRUE(ds->PublishShard(manifest_.shards[2].file).ok());
  EXPECT_FALSE(ds->staging());
  EXPECT_EQ(RecordBytes(*ds, in2), RecordBytes(*local_, in2));
  EXPECT_EQ(ds->ContentDigest().value(), local_->ContentDigest().value());
}

TEST_F(DatasetStagingTest, PrefetchCoalescesEachShardsRecordsIntoOneGet) {
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_));
  ASSERT_NE(ds, nullptr);
  std::vector<uint64_t> ids;
  for (uint64_t id = manifest_.num_samples; id-- > 0;) ids.push_back(id);
  ds->Prefetch(ids);
  for (uint64_t id : ids) {
    EXPECT_EQ(RecordBytes(*ds, id), RecordBytes(*local_, id));
  }
  // Neighbouring records of one shard: one GET each shard, none per read.
  EXPECT_EQ(ds->remote_stats().requests, manifest_.shards.size());
  EXPECT_EQ(ds->remote_stats().records, ids.size());
  // Asking again for records in the cache fetches nothing.
  ds->Prefetch(ids);
  RecordBytes(*ds, 3);
  EXPECT_EQ(ds->remote_stats().requests, manifest_.shards.size());
}

TEST_F(DatasetStagingTest, ReadWaitsForTheFetchInFlightInsteadOfFetchingTwice) {
  auto gated = std::make_unique<GatedSource>(FolderSource(source_));
  GatedSource* gate = gated.get();
  std::unique_ptr<Dataset> ds = OpenStaging(std::move(gated));
  ASSERT_NE(ds, nullptr);
  // Runs before ds goes, even when an assertion fails: its fetchers, held
  // in the gate, must finish for it to stop.
  absl::Cleanup open_gate = [gate] { gate->Open(); };
  const std::vector<uint64_t> ids = {5, 6};
  ds->Prefetch(ids);
  ASSERT_TRUE(testing::WaitFor([&] { return gate->waiting() == 1; },
                               std::chrono::seconds(10)));
  std::string got;
  std::thread reader([&] { got = RecordBytes(*ds, 6); });
  gate->Open();
  reader.join();
  EXPECT_EQ(got, RecordBytes(*local_, 6));
  EXPECT_EQ(ds->remote_stats().requests, 1u);
}

TEST_F(DatasetStagingTest, AReadWaitingForAFetchReadsItsShardOncePublished) {
  auto gated = std::make_unique<GatedSource>(FolderSource(source_));
  GatedSource* gate = gated.get();
  std::unique_ptr<Dataset> ds = OpenStaging(std::move(gated));
  ASSERT_NE(ds, nullptr);
  absl::Cleanup open_gate = [gate] { gate->Open(); };
  const std::vector<uint64_t> ids = {6};
  ds->Prefetch(ids);
  ASSERT_TRUE(testing::WaitFor([&] { return gate->waiting() == 1; },
                               std::chrono::seconds(10)));
  std::string got;
  ReadInfo info;
  std::thread reader([&] { got = RecordBytes(*ds, 6, &info); });
  ASSERT_TRUE(testing::WaitFor([&] { return ds->remote_stats().joined == 1; },
                               std::chrono::seconds(10)));
  // The copy publishes record 6's shard while the read waits for the
  // prefetch: the read takes the local file, not a second GET.
  size_t shard = 0;
  while (manifest_.shards[shard].first_id + manifest_.shards[shard].num_samples
         <= 6) {
    ++shard;
  }
  CopyShard(shard);
  ASSERT_TRUE(ds->PublishShard(manifest_.shards[shard].file).ok());
  gate->Open();
  reader.join();
  EXPECT_EQ(got, RecordBytes(*local_, 6));
  EXPECT_FALSE(info.from_source);
  // The read may end before the prefetch's GET is counted; it sent none.
  ASSERT_TRUE(testing::WaitFor([&] { return ds->remote_stats().requests > 0; },
                               std::chrono::seconds(10)));
  EXPECT_EQ(ds->remote_stats().requests, 1u);
}

TEST_F(DatasetStagingTest, CorruptRemoteRecordIsRefetchedThenDataLossWithUrl) {
  // A copy of the pack whose record 4 has one byte flipped.
  const std::string bad = tmp_.path() + "/bad";
  fs::copy(source_, bad);
  const ShardInfo& shard = manifest_.shards[0];
  std::string index_bytes;
  {
    std::ifstream in(source_ + "/" + shard.index_file, std::ios::binary);
    index_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const RecordRange r = ParseShardIndex(index_bytes, "idx")->records[4];
  {
    std::fstream f(bad + "/" + shard.file,
                   std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(r.offset + r.length / 2);
    const char c = static_cast<char>(f.get());
    f.seekp(r.offset + r.length / 2);
    f.put(static_cast<char>(c ^ 0x20));
  }
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(bad));
  ASSERT_NE(ds, nullptr);
  const absl::Status st =
      ds->Read(4, [](const RecordView&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("dataset 'staged'"));
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("shard ", shard.file)));
  EXPECT_THAT(st.message(), HasSubstr("key 4"));
  EXPECT_THAT(st.message(), HasSubstr(bad + "/" + shard.file));
  EXPECT_FALSE(IsShardDamage(st));  // One record, as a local bad record.
  EXPECT_FALSE(IsSourceFailure(st));
  EXPECT_EQ(ds->remote_stats().refetches, 1u);
  // Its neighbours are sound; a prefetch that meets it keeps the error for
  // the read that needs the record.
  EXPECT_EQ(RecordBytes(*ds, 3), RecordBytes(*local_, 3));
  const std::vector<uint64_t> ids = {4};
  ds->Prefetch(ids);
  EXPECT_EQ(ds->Read(4, [](const RecordView&) { return absl::OkStatus(); })
                .code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(DatasetStagingTest, SourceThatFailsIsASourceFailureNotABadRecord) {
  // The source loses shard 2 after the dataset opened (its index was read).
  const std::string gone = tmp_.path() + "/gone";
  fs::copy(source_, gone);
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(gone));
  ASSERT_NE(ds, nullptr);
  fs::remove(gone + "/" + manifest_.shards[2].file);
  const uint64_t id = manifest_.shards[2].first_id;
  const absl::Status st =
      ds->Read(id, [](const RecordView&) { return absl::OkStatus(); });
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(absl::IsDataLoss(st)) << st;
  EXPECT_TRUE(IsSourceFailure(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("key ", id)));
  // A bad record is not one.
  EXPECT_FALSE(IsSourceFailure(absl::DataLossError("checksum mismatch")));
}

TEST_F(DatasetStagingTest, PackWithoutRecordIndexesWaitsForItsCopy) {
  for (ShardInfo& s : manifest_.shards) {
    s.index_file.clear();
    s.index_bytes = 0;
    s.index_digest.clear();
  }
  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::OpenStaging(
      "staged", dest_, manifest_, FolderSource(source_), RemoteOptions());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ds.status().message(), HasSubstr("no record index"));
}

TEST_F(DatasetStagingTest, IndexThatIsNotTheManifestsIsDataLoss) {
  manifest_.shards[1].index_digest = manifest_.shards[0].index_digest;
  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::OpenStaging(
      "staged", dest_, manifest_, FolderSource(source_), RemoteOptions());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ds.status().message(), HasSubstr(manifest_.shards[1].index_file));
}

TEST_F(DatasetStagingTest, CacheStaysWithinItsBound) {
  RemoteOptions options;
  options.cache_bytes = 16 << 10;
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_), options);
  ASSERT_NE(ds, nullptr);
  for (uint64_t id = 0; id < manifest_.num_samples; ++id) {
    EXPECT_EQ(RecordBytes(*ds, id), RecordBytes(*local_, id));
    EXPECT_LE(ds->remote_stats().cached_bytes, options.cache_bytes);
  }
  // The records came to more than the bound.
  uint64_t total = 0;
  for (uint64_t id = 0; id < manifest_.num_samples; ++id) {
    ReadInfo info;
    RecordBytes(*ds, id, &info);
    total += info.bytes;
  }
  EXPECT_GT(total, options.cache_bytes);
}

TEST_F(DatasetStagingTest, ManyReadersWhileShardsArePublished) {
  std::unique_ptr<Dataset> ds = OpenStaging(FolderSource(source_));
  ASSERT_NE(ds, nullptr);
  std::vector<std::string> want;
  for (uint64_t id = 0; id < manifest_.num_samples; ++id) {
    want.push_back(RecordBytes(*local_, id));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        std::vector<uint64_t> ids;
        for (uint64_t id = t; id < manifest_.num_samples; id += 2) {
          ids.push_back(id);
        }
        ds->Prefetch(ids);
        for (uint64_t id : ids) {
          if (RecordBytes(*ds, id) != want[id]) ++wrong;
        }
      }
    });
  }
  for (size_t i = 0; i < manifest_.shards.size(); ++i) {
    CopyShard(i);
    ASSERT_TRUE(ds->PublishShard(manifest_.shards[i].file).ok());
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_FALSE(ds->staging());
}

}  // namespace
}  // namespace stoker::dataset
