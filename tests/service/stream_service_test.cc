#include "server/service/stream_service.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/open_planner.h"
#include "tests/service/service_fixture.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::service {
namespace {

using ::testing::HasSubstr;

// Records what it is told.
class FakeObserver : public StreamObserver {
 public:
  void OnOpen(const StreamSnapshot& s, uint64_t reserved,
              std::string_view share_refused) override {
    absl::MutexLock lock(&mu_);
    opened.push_back(s.id);
  }
  void OnClose(const StreamSnapshot& s, const absl::Status& status,
               double seconds) override {
    absl::MutexLock lock(&mu_);
    closed.push_back(s.id);
    statuses.push_back(status);
  }
  absl::Mutex mu_;
  std::vector<uint64_t> opened, closed;
  std::vector<absl::Status> statuses;
};

class StreamServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = fixture::MakeTypedCatalog(dir_.path());
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    pool_.Start();
    auto plan = PlanOpen(fixture::TypedSpec("all", 4), catalog_, OpenLimits{});
    ASSERT_TRUE(plan.ok()) << plan.status();
    stream_bytes_ = plan->request.bytes;
    batch_bytes_ = plan->batch_bytes;
  }
  std::unique_ptr<StreamService> Service(uint64_t budget) {
    ServiceOptions options;
    options.memory_budget = budget;
    options.share_lag_window = 8;
    return std::make_unique<StreamService>(&pool_, options, catalog_);
  }
  static StreamSpec Shared() {
    StreamSpec spec = fixture::TypedSpec("all", 4);
    spec.share = true;
    return spec;
  }

  testing::ScopedTempDir dir_;
  std::shared_ptr<const Catalog> catalog_;
  pipeline::WorkerPool pool_{2};
  uint64_t stream_bytes_ = 0;  // One stream's reservation (window 4).
  uint64_t batch_bytes_ = 0;
};

TEST_F(StreamServiceTest, StreamsThatAskToShareJoinOneRun) {
  auto service = Service(1ull << 30);
  auto a = service->Open(Shared());
  auto b = service->Open(Shared());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->shared);
  EXPECT_TRUE(b->shared);
  EXPECT_EQ(a->run_memory, b->run_memory);
  EXPECT_EQ(service->GetStats().shared_runs, 1u);
  EXPECT_EQ(a->prefetch, 4u);
  EXPECT_EQ(a->window, 4u);
  fixture::Drained da = fixture::Drain(*a->stream, a->window);
  fixture::Drained db = fixture::Drain(*b->stream, b->window);
  ASSERT_TRUE(da.status.ok() && db.status.ok());
  ASSERT_EQ(da.batches.size(), db.batches.size());
  for (size_t i = 0; i < da.batches.size(); ++i) {
    EXPECT_EQ(da.batches[i].sample_ids, db.batches[i].sample_ids);
  }
}

// The budget holds the stream but not a run's buffers: it builds alone,
// says why, and is counted.
TEST_F(StreamServiceTest, AShareTheBudgetCannotHoldBuildsAloneAndSaysWhy) {
  auto service = Service(stream_bytes_ + batch_bytes_);
  auto a = service->Open(Shared());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->shared);
  EXPECT_THAT(a->share_refused, HasSubstr("no shared run"));
  EXPECT_THAT(a->share_refused, HasSubstr("memory_budget"));
  EXPECT_EQ(service->GetStats().share_fallbacks, 1u);
  EXPECT_EQ(service->GetStats().shared_runs, 0u);
  EXPECT_TRUE(fixture::Drain(*a->stream, a->window).status.ok());
}

TEST_F(StreamServiceTest, ShutdownEndsOpenStreamsAndRefusesNewOnes) {
  auto service = Service(1ull << 30);
  FakeObserver observer;
  service->SetObserver(&observer);
  auto a = service->Open(fixture::TypedSpec("all", 4));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(service->Snapshot().size(), 1u);
  service->Shutdown();
  EXPECT_EQ(a->stream->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(a->stream->Done());
  EXPECT_EQ(service->Open(fixture::TypedSpec("all", 4)).status().code(),
            absl::StatusCode::kUnavailable);
  // A request out of bounds still hears what is wrong with it.
  EXPECT_EQ(service->Open(fixture::TypedSpec("all", 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const uint64_t id = a->ticket->id();
  *a = OpenedStream();  // The last holder lets go: the observer hears.
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.opened, std::vector<uint64_t>{id});
  EXPECT_EQ(observer.closed, std::vector<uint64_t>{id});
  EXPECT_EQ(observer.statuses[0].code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace stoker::service
