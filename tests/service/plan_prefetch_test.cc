// The plan prefetcher asks a staging dataset for the records of the batches
// ahead, once each, and never past the stream's end.
#include "server/service/plan_prefetch.h"

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "server/dataset/file_util.h"
#include "server/dataset/shard_index.h"
#include "server/storage/store_ranges.h"
#include "server/storage/url.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::service {
namespace {

class PlanPrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 24, 3, 3, 5);
    ASSERT_TRUE(dir.ok()) << dir.status();
    source_ = *dir;
    const std::string dest = tmp_.path() + "/dest";
    std::filesystem::create_directories(dest);
    absl::StatusOr<dataset::Manifest> manifest = dataset::ReadManifest(*dir);
    ASSERT_TRUE(manifest.ok());
    absl::StatusOr<std::unique_ptr<dataset::Dataset>> ds =
        dataset::Dataset::OpenStaging(
            "staged", dest, *manifest,
            storage::StoreRanges(storage::MakeLocalStore(
                storage::ParseLocation(*dir).value())),
            dataset::RemoteOptions());
    ASSERT_TRUE(ds.ok()) << ds.status();
    ds_ = *std::move(ds);
  }

  dataset::Sampler MakeSampler() {
    dataset::SamplerOptions o;
    o.num_samples = 24;
    o.seed = 9;
    o.batch_size = 4;
    return dataset::Sampler::Create(o).value();  // 6 steps an epoch.
  }

  // The records of positions [from, to) of MakeSampler()'s plan.
  std::set<uint64_t> IdsOf(uint64_t from, uint64_t to) {
    dataset::Sampler s = MakeSampler();
    std::set<uint64_t> ids;
    for (uint64_t p = from; p < to; ++p) {
      for (uint64_t id : s.StepSamples(p / 6, p % 6)) ids.insert(id);
    }
    return ids;
  }

  // Reads `ids`; returns the bytes of their records.
  uint64_t Read(const std::set<uint64_t>& ids) {
    uint64_t bytes = 0;
    for (uint64_t id : ids) {
      dataset::ReadInfo info;
      EXPECT_TRUE(ds_->Read(
                         id, [](const dataset::RecordView&) {
                           return absl::OkStatus();
                         },
                         &info)
                      .ok());
      bytes += info.bytes;
    }
    return bytes;
  }

  testing::ScopedTempDir tmp_;
  std::string source_;
  std::unique_ptr<dataset::Dataset> ds_;
};

TEST_F(PlanPrefetchTest, FetchesTheNextBatchesOnceInCoalescedGets) {
  PlanPrefetcher prefetch(ds_.get(), MakeSampler(), /*end=*/12, /*depth=*/2);
  prefetch.Ahead(0);  // Positions 0, 1 and 2.
  const uint64_t bytes = Read(IdsOf(0, 3));
  // Read after the prefetch asked for them: one GET a shard and position
  // at most, and the reads waited for those instead of fetching again.
  const dataset::RemoteReadStats first = ds_->remote_stats();
  EXPECT_LE(first.requests, 9u);
  EXPECT_EQ(first.cached_bytes, bytes);  // Nothing beyond position 2.
  prefetch.Ahead(0);
  prefetch.Ahead(1);  // Only position 3 is new.
  const uint64_t more = Read(IdsOf(0, 4));
  const dataset::RemoteReadStats second = ds_->remote_stats();
  EXPECT_LE(second.requests, first.requests + 3);
  EXPECT_EQ(second.cached_bytes, more);
}

// A source that lists the ranges asked of it, in order.
class RecordingRanges : public dataset::RangeSource {
 public:
  explicit RecordingRanges(std::unique_ptr<dataset::RangeSource> inner)
      : inner_(std::move(inner)) {}
  std::string Url(const std::string& file) const override {
    return inner_->Url(file);
  }
  absl::StatusOr<std::string> Read(const std::string& file, uint64_t offset,
                                   uint64_t length) override {
    {
      absl::MutexLock lock(&mu_);
      asked_.push_back({file, offset, offset + length});
    }
    return inner_->Read(file, offset, length);
  }
  struct Asked {
    std::string file;
    uint64_t begin, end;
  };
  std::vector<Asked> asked() const {
    absl::MutexLock lock(&mu_);
    return asked_;
  }

 private:
  const std::unique_ptr<dataset::RangeSource> inner_;
  mutable absl::Mutex mu_;
  std::vector<Asked> asked_ ABSL_GUARDED_BY(mu_);
};

// The batches ahead are asked for a position at a time: every GET holds
// records of one position, and the GETs come in plan order, so the batch
// built next does not wait for the records of those after it.
TEST_F(PlanPrefetchTest, FetchesTheBatchBuiltNextFirst) {
  const dataset::Manifest manifest = dataset::ReadManifest(source_).value();
  auto recording = std::make_unique<RecordingRanges>(storage::StoreRanges(
      storage::MakeLocalStore(storage::ParseLocation(source_).value())));
  RecordingRanges* ranges = recording.get();
  dataset::RemoteOptions options;
  options.parallel = 1;  // One fetcher: the GETs run in the order queued.
  options.max_gap = 0;   // Only touching records share a GET.
  const std::string dest = tmp_.path() + "/dest-order";
  std::filesystem::create_directories(dest);
  std::unique_ptr<dataset::Dataset> ds =
      dataset::Dataset::OpenStaging("staged", dest, manifest,
                                    std::move(recording), options)
          .value();
  // Where each record lies, from the record indexes.
  std::map<std::pair<std::string, uint64_t>, uint64_t> id_at;  // -> id
  for (const dataset::ShardInfo& shard : manifest.shards) {
    std::string bytes;
    ASSERT_TRUE(dataset::ReadFileToString(source_ + "/" + shard.index_file,
                                          &bytes)
                    .ok());
    const dataset::ShardIndex index =
        dataset::ParseShardIndex(bytes, shard.index_file).value();
    for (size_t i = 0; i < index.records.size(); ++i) {
      id_at[{shard.file, index.records[i].offset}] = index.first_id + i;
    }
  }
  dataset::Sampler sampler = MakeSampler();
  std::map<uint64_t, uint64_t> position_of;  // id -> position
  for (uint64_t p = 0; p < 3; ++p) {
    for (uint64_t id : sampler.StepSamples(0, p)) position_of[id] = p;
  }

  PlanPrefetcher prefetch(ds.get(), MakeSampler(), /*end=*/12, /*depth=*/2);
  prefetch.Ahead(0);  // Positions 0, 1 and 2.
  for (const auto& [id, p] : position_of) {
    ASSERT_TRUE(
        ds->Read(id, [](const dataset::RecordView&) {
              return absl::OkStatus();
            }).ok());
  }
  uint64_t last = 0;
  size_t gets = 0;
  for (const RecordingRanges::Asked& a : ranges->asked()) {
    // OpenStaging reads the record indexes through the source too.
    if (absl::EndsWith(a.file, ".idx")) continue;
    std::set<uint64_t> positions;
    for (auto it = id_at.lower_bound({a.file, a.begin});
         it != id_at.end() && it->first.first == a.file &&
         it->first.second < a.end;
         ++it) {
      if (position_of.count(it->second)) {
        positions.insert(position_of[it->second]);
      }
    }
    ASSERT_EQ(positions.size(), 1u) << a.file << " at " << a.begin;
    EXPECT_GE(*positions.begin(), last) << "GET " << gets << " out of order";
    last = *positions.begin();
    ++gets;
  }
  EXPECT_EQ(last, 2u);
}

TEST_F(PlanPrefetchTest, AsksNothingPastTheStreamsEnd) {
  PlanPrefetcher prefetch(ds_.get(), MakeSampler(), /*end=*/2, /*depth=*/8);
  prefetch.Ahead(0);
  const uint64_t bytes = Read(IdsOf(0, 2));
  EXPECT_EQ(ds_->remote_stats().cached_bytes, bytes);
}

TEST_F(PlanPrefetchTest, AsksNothingOfADatasetThatIsAllLocal) {
  absl::StatusOr<std::unique_ptr<dataset::Dataset>> local =
      dataset::Dataset::Open("local", source_);
  ASSERT_TRUE(local.ok()) << local.status();
  PlanPrefetcher prefetch(local->get(), MakeSampler(), 12, /*depth=*/8);
  prefetch.Ahead(0);
  EXPECT_FALSE((*local)->has_source());
  EXPECT_EQ((*local)->remote_stats().requests, 0u);
}

}  // namespace
}  // namespace stoker::service
