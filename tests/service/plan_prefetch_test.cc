// The plan prefetcher asks a staging dataset for the records of the batches
// ahead, once each, and never past the stream's end.
#include "server/service/plan_prefetch.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
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
  // Read after the prefetch asked for them: one GET a shard at most, and
  // the reads waited for those instead of fetching again.
  const dataset::RemoteReadStats first = ds_->remote_stats();
  EXPECT_LE(first.requests, 3u);
  EXPECT_EQ(first.cached_bytes, bytes);  // Nothing beyond position 2.
  prefetch.Ahead(0);
  prefetch.Ahead(1);  // Only position 3 is new.
  const uint64_t more = Read(IdsOf(0, 4));
  const dataset::RemoteReadStats second = ds_->remote_stats();
  EXPECT_LE(second.requests, first.requests + 3);
  EXPECT_EQ(second.cached_bytes, more);
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
  PlanPrefetcher prefetch(local->get(), MakeSampler(), 12);
  prefetch.Ahead(0);
  EXPECT_FALSE((*local)->has_source());
  EXPECT_EQ((*local)->remote_stats().requests, 0u);
}

}  // namespace
}  // namespace stoker::service
