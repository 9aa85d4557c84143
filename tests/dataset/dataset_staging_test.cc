// A dataset served while it is staged: records of shards not local yet are
// read by range from a real source (a local Store over a folder holding the
// pack), checked, cached within a bound, prefetched in coalesced GETs, and
// read from the local file once a shard is published.
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
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The pack's source: the folder `dir` through the local Store.
std::unique_ptr<RangeSource> FolderSource(const std::string& dir) {
  absl::StatusOr<storage::Location> location = storage::ParseLocation(dir);
  EXPECT_TRUE(location.ok()) << location.status();
  return storage::StoreRanges(storage::MakeLocalStore(*location));
}

// Holds every Read of a shard file (not of a record index) until Open():
// for a test that needs a fetch in flight.
class GatedSource : public RangeSource {
 public:
  explicit GatedSource(std::unique_ptr<RangeSource> inner)
      : inner_(std::move(inner)) {}
  std::string Url(const std::string& file) const override {
    return inner_->Url(file);
  }
  absl::StatusOr<std::string> Read(const std::string& file, uint64_t offset,
                                   uint64_t length) override {
    if (file.size() > 5 && file.substr(file.size() - 5) == ".lmdb") {
      absl::MutexLock lock(&mu_);
      ++waiting_;
      mu_.Await(absl::Condition(&open_));
      --waiting_;
    }
    return inner_->Read(file, offset, length);
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  int waiting() {
    absl::MutexLock lock(&mu_);
    return waiting_;
  }

 private:
  const std::unique_ptr<RangeSource> inner_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

// Every field of record `id`, concatenated with their sizes.
std::string RecordBytes(const Dataset& ds, uint64_t id,
                        ReadInfo* info = nullptr) {
  absl::StatusOr<std::string> bytes = testing::RecordFieldBytes(ds, id, info);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

class DatasetStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 24, 3, 3, 7);
    ASSERT_TRUE(dir.ok()) << dir.status();
    source_ = *dir;
    dest_ = tmp_.path() + "/dest";
    fs::create_directories(dest_);
    absl::StatusOr<std::unique_ptr<Dataset>> opened =
        Dataset::Open("local", source_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    local_ = *std::move(opened);
    manifest_ = local_->manifest();
  }

  std::unique_ptr<Dataset> OpenStaging(std::unique_ptr<RangeSource> source,
                                       RemoteOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::OpenStaging(
        "staged", dest_, manifest_, std::move(source), options);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? *std::move(ds) : nullptr;
  }

  // Copies shard `i`'s file into dest, as a pull publishes it.
  void CopyShard(size_t i) {
    fs::copy_file(source_ + "/" + manifest_.shards[i].file,
                  dest_ + "/" + manifest_.shards[i].file);
  }

  testing::ScopedTempDir tmp_;
  std::string source_, dest_;
  std::unique_ptr<Dataset> local_;
  Manifest manifest_;
};

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
