#include "server/service/service_counters.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/service/service_fixture.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::service {
namespace {

StreamSpec Labelled(const std::string& job) {
  StreamSpec spec;
  spec.dataset = "d";
  spec.pipeline = "p";
  spec.job_id = job;
  spec.transport = "grpc";
  return spec;
}

TEST(ServiceCountersTest, StreamsOfOneLabelSetShareTheirCounters) {
  ServiceCounters counts;
  auto a = counts.For(Labelled("j"));
  EXPECT_EQ(counts.For(Labelled("j")), a);
  StreamSpec shm = Labelled("j");
  shm.transport = "shm";
  EXPECT_NE(counts.For(shm), a);
  EXPECT_EQ(counts.All().size(), 2u);
}

// Job ids come from clients: past the bound, new ones share one label set,
// so that the metrics' cardinality stays bounded.
TEST(ServiceCountersTest, JobsPastTheBoundShareTheOtherLabelSet) {
  ServiceCounters counts;
  for (size_t i = 0; i < ServiceCounters::kMaxCounterKeys; ++i) {
    counts.For(Labelled("job" + std::to_string(i)));
  }
  auto late = counts.For(Labelled("late"));
  EXPECT_EQ(counts.For(Labelled("later")), late);
  EXPECT_EQ(counts.All().size(), ServiceCounters::kMaxCounterKeys + 1);
  size_t other = 0;
  for (const auto& [key, c] : counts.All()) other += key.job == "_other";
  EXPECT_EQ(other, 1u);
  // One seen before the bound keeps its own.
  EXPECT_NE(counts.For(Labelled("job0")), late);
}

TEST(ServiceCountersTest, CountsErrorsByCodeAndShareFallbacks) {
  ServiceCounters counts;
  counts.RecordError(absl::StatusCode::kDataLoss);
  counts.RecordError(absl::StatusCode::kDataLoss);
  counts.RecordError(absl::StatusCode::kCancelled);
  counts.RecordShareFallback();
  const auto errors = counts.Errors();
  EXPECT_EQ(errors[static_cast<int>(absl::StatusCode::kDataLoss)], 2);
  EXPECT_EQ(errors[static_cast<int>(absl::StatusCode::kCancelled)], 1);
  EXPECT_EQ(errors[static_cast<int>(absl::StatusCode::kOk)], 0);
  EXPECT_EQ(counts.share_fallbacks(), 1u);
}

TEST(ServiceCountersTest, AHealthyDatasetListsNoDamage) {
  testing::ScopedTempDir dir;
  auto catalog = fixture::MakeTypedCatalog(dir.path());
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const std::vector<DatasetHealth> health = DatasetHealthOf(**catalog);
  ASSERT_EQ(health.size(), 1u);
  EXPECT_EQ(health[0].dataset, "typed");
  EXPECT_TRUE(health[0].damage.empty());
}

}  // namespace
}  // namespace stoker::service
