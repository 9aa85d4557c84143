#include "server/service/opener.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/worker_pool.h"
#include "server/service/open_planner.h"
#include "server/service/stream_service.h"
#include "tests/service/service_fixture.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/wait_for.h"

namespace stoker::service {
namespace {

using ::stoker::testing::WaitFor;
using ::testing::HasSubstr;

// The opener's clock: the real one, moved on by `skew` seconds.
std::atomic<int64_t> skew_seconds{0};
absl::Time SkewedNow() {
  return absl::Now() + absl::Seconds(skew_seconds.load());
}

class OpenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    skew_seconds = 0;
    auto catalog = fixture::MakeTypedCatalog(dir_.path());
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    // The budget holds one stream of TypedSpec("all", 4).
    absl::StatusOr<OpenPlan> plan =
        PlanOpen(fixture::TypedSpec("all", 4), *catalog, OpenLimits{});
    ASSERT_TRUE(plan.ok()) << plan.status();
    ServiceOptions options;
    options.memory_budget = plan->request.bytes;
    service_ = std::make_unique<StreamService>(&pool_, options, *catalog);
    opener_ = std::make_unique<Opener>(service_.get(), &SkewedNow);
    opener_->Start();
  }
  void TearDown() override { opener_->Stop(); }

  // Submits an open of `spec`; its answer lands in answers_[tag].
  void Submit(const std::string& tag, const StreamSpec& spec,
              absl::Duration wait = absl::Seconds(60),
              std::function<bool()> cancelled = nullptr) {
    opener_->Submit(spec, absl::Now() + wait, std::move(cancelled),
                    [this, tag](absl::StatusOr<OpenedStream> opened) {
                      absl::MutexLock lock(&mu_);
                      order_.push_back(tag);
                      answers_.emplace(tag, std::move(opened));
                    });
  }
  bool Answered(const std::string& tag) {
    absl::MutexLock lock(&mu_);
    return answers_.count(tag) != 0;
  }
  bool WaitAnswered(const std::string& tag) {
    return WaitFor([&] { return Answered(tag); }, std::chrono::seconds(20));
  }
  absl::StatusOr<OpenedStream> Take(const std::string& tag) {
    absl::MutexLock lock(&mu_);
    auto it = answers_.find(tag);
    absl::StatusOr<OpenedStream> out = std::move(it->second);
    answers_.erase(it);
    return out;
  }
  bool Waiting(uint32_t n) {
    return WaitFor([&] { return service_->GetStats().waiting_opens == n; },
                   std::chrono::seconds(20));
  }

  testing::ScopedTempDir dir_;
  pipeline::WorkerPool pool_{1};
  std::unique_ptr<StreamService> service_;
  std::unique_ptr<Opener> opener_;
  absl::Mutex mu_;
  std::map<std::string, absl::StatusOr<OpenedStream>> answers_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
};

TEST_F(OpenerTest, WaitingOpensAreAdmittedInTheOrderTheyCame) {
  Submit("a", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(WaitAnswered("a"));
  absl::StatusOr<OpenedStream> a = Take("a");
  ASSERT_TRUE(a.ok()) << a.status();
  Submit("b", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(Waiting(1));
  Submit("c", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(Waiting(2));
  EXPECT_FALSE(Answered("b"));

  *a = OpenedStream();  // The stream and its ticket go: budget for one.
  ASSERT_TRUE(WaitAnswered("b"));
  absl::StatusOr<OpenedStream> b = Take("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(Answered("c")) << "the budget holds one stream";
  EXPECT_EQ(service_->GetStats().waiting_opens, 1u);
  *b = OpenedStream();
  ASSERT_TRUE(WaitAnswered("c"));
  EXPECT_TRUE(Take("c").ok());
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(order_, (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(OpenerTest, AWaitingOpenIsRefusedAtItsDeadlineNamingTheBound) {
  Submit("a", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(WaitAnswered("a"));
  absl::StatusOr<OpenedStream> a = Take("a");
  ASSERT_TRUE(a.ok());
  Submit("b", fixture::TypedSpec("all", 4), absl::Seconds(5));
  ASSERT_TRUE(Waiting(1));
  skew_seconds = 10;  // Past its deadline on the opener's clock.
  ASSERT_TRUE(WaitAnswered("b"));
  absl::StatusOr<OpenedStream> b = Take("b");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("memory_budget"));
  EXPECT_EQ(service_->GetStats().waiting_opens, 0u);
}

TEST_F(OpenerTest, AnOpenWhoseClientGaveUpIsCancelled) {
  Submit("a", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(WaitAnswered("a"));
  absl::StatusOr<OpenedStream> a = Take("a");
  ASSERT_TRUE(a.ok());
  std::atomic<bool> gone{false};
  Submit("b", fixture::TypedSpec("all", 4), absl::Seconds(60),
         [&] { return gone.load(); });
  ASSERT_TRUE(Waiting(1));
  gone = true;
  ASSERT_TRUE(WaitAnswered("b"));
  absl::StatusOr<OpenedStream> b = Take("b");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(b.status().message(), HasSubstr("gave up while waiting"));
  EXPECT_EQ(service_->GetStats().waiting_opens, 0u);
}

TEST_F(OpenerTest, ABadRequestIsAnsweredAtOnceAndWaitsForNothing) {
  StreamSpec bad = fixture::TypedSpec("all", 4);
  bad.dataset = "missing";
  Submit("bad", bad);
  ASSERT_TRUE(WaitAnswered("bad"));
  EXPECT_EQ(Take("bad").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(service_->GetStats().waiting_opens, 0u);
}

TEST_F(OpenerTest, StopAnswersEveryWaitingOpenWithUnavailable) {
  Submit("a", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(WaitAnswered("a"));
  absl::StatusOr<OpenedStream> a = Take("a");
  ASSERT_TRUE(a.ok());
  Submit("b", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(Waiting(1));
  opener_->Stop();
  ASSERT_TRUE(Answered("b"));
  EXPECT_EQ(Take("b").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_->GetStats().waiting_opens, 0u);
  // And every later one.
  Submit("c", fixture::TypedSpec("all", 4));
  ASSERT_TRUE(Answered("c"));
  EXPECT_EQ(Take("c").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace stoker::service
