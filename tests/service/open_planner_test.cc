#include "server/service/open_planner.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/stream_session.h"
#include "tests/service/service_fixture.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::service {
namespace {

using ::testing::HasSubstr;

class OpenPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = fixture::MakeTypedCatalog(dir_.path());
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  absl::StatusOr<OpenPlan> Plan(const StreamSpec& spec,
                                const OpenLimits& limits = {}) {
    return PlanOpen(spec, catalog_, limits);
  }
  // The error a plan of `spec` fails with.
  absl::Status Refusal(const StreamSpec& spec, const OpenLimits& limits = {}) {
    absl::StatusOr<OpenPlan> plan = Plan(spec, limits);
    return plan.ok() ? absl::OkStatus() : plan.status();
  }

  testing::ScopedTempDir dir_;
  std::shared_ptr<const Catalog> catalog_;
};

TEST_F(OpenPlannerTest, FillsTheStreamOptionsAndTheRequestOnce) {
  StreamSpec spec = fixture::TypedSpec("all", 4);
  spec.job_id = "j";
  spec.rank = 1;
  spec.world_size = 2;
  OpenLimits limits;
  limits.default_prefetch = 3;
  limits.on_corrupt = OnCorrupt::kFail;
  absl::StatusOr<OpenPlan> plan = Plan(spec, limits);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The depth granted is the default for a request that asks for none.
  EXPECT_EQ(plan->spec().prefetch, 3u);
  EXPECT_EQ(plan->window, 3u);
  EXPECT_GT(plan->batch_bytes, 0u);
  EXPECT_EQ(plan->request.bytes, 3 * plan->batch_bytes);
  EXPECT_EQ(plan->request.peer, "local");
  EXPECT_EQ(plan->request.job_id, "j");
  EXPECT_EQ(plan->request.rank, 1u);
  EXPECT_EQ(plan->request.plan.num_samples, uint64_t{fixture::kSamples});
  EXPECT_FALSE(plan->request.plan.dataset_digest.empty());
  EXPECT_EQ(plan->request.plan.pipeline_definition,
            catalog_->FindPipeline("all").value()->definition());
  const Stream::Options& o = plan->stream;
  EXPECT_EQ(o.catalog, catalog_);
  EXPECT_EQ(o.dataset, catalog_->FindDataset("typed").value());
  ASSERT_NE(o.pipeline, nullptr);
  ASSERT_TRUE(o.sampler.has_value());
  EXPECT_EQ(o.on_corrupt, OnCorrupt::kFail);
  // Left to the service: where it runs and what it counts into.
  EXPECT_EQ(o.pool, nullptr);
  EXPECT_EQ(o.group, nullptr);
  EXPECT_EQ(o.counters, nullptr);
  EXPECT_EQ(plan->formatted, nullptr);
}

TEST_F(OpenPlannerTest, TheWindowGrowsByWhatAClientHolds) {
  StreamSpec spec = fixture::TypedSpec("all", 4);
  spec.prefetch = 2;
  spec.client_holds = true;
  spec.hold = 3;
  absl::StatusOr<OpenPlan> plan = Plan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->window, StreamSession::Window(2, true, 3));
  EXPECT_EQ(plan->request.bytes, plan->window * plan->batch_bytes);
}

TEST_F(OpenPlannerTest, RefusesEachBoundNamingIt) {
  OpenLimits limits;
  limits.max_batch_size = 8;
  limits.max_prefetch = 4;
  const auto refused = [&](auto edit, const std::string& says) {
    StreamSpec spec = fixture::TypedSpec("all", 4);
    edit(spec);
    absl::Status s = Refusal(spec, limits);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << says;
    EXPECT_THAT(s.message(), HasSubstr(says));
  };
  refused([](StreamSpec& s) { s.batch_size = 0; }, "max_batch_size=8");
  refused([](StreamSpec& s) { s.batch_size = 9; }, "max_batch_size=8");
  refused([](StreamSpec& s) { s.prefetch = 5; }, "max_prefetch=4");
  refused([](StreamSpec& s) { s.hold = 5; }, "hold 5");
  refused([](StreamSpec& s) { s.rank = 2, s.world_size = 2; },
          "not below world_size");
  refused([](StreamSpec& s) { s.weight = 0; }, "weight 0");
  refused([](StreamSpec& s) { s.job_id = std::string(300, 'j'); },
          "job_id is 300 bytes");
  refused([](StreamSpec& s) { s.start_step = 7; }, "start position");
  refused([](StreamSpec& s) { s.start_epoch = 2; }, "start position");
  refused([](StreamSpec& s) { s.end_step = 7; }, "end position");
  refused([](StreamSpec& s) { s.start_step = 2, s.end_step = 1; },
          "before the start");
  // 26 samples over 8 ranks with drop_last: 3 each, no batch of 4.
  refused(
      [](StreamSpec& s) { s.rank = 7, s.world_size = 8, s.drop_last = true; },
      "drop_last");
  limits.max_batch_bytes = 16;
  refused([](StreamSpec&) {}, "max_batch_bytes=16");
}

TEST_F(OpenPlannerTest, AnUnknownDatasetOrPipelineIsNotFound) {
  StreamSpec spec = fixture::TypedSpec("all", 4);
  spec.dataset = "nope";
  EXPECT_EQ(Refusal(spec).code(), absl::StatusCode::kNotFound);
  spec = fixture::TypedSpec("nope", 4);
  EXPECT_EQ(Refusal(spec).code(), absl::StatusCode::kNotFound);
}

TEST_F(OpenPlannerTest, AnEndAtTheStartIsAnEmptyStreamNotAMistake) {
  StreamSpec spec = fixture::TypedSpec("all", 4, /*epochs=*/2);
  spec.start_epoch = 1;
  spec.start_step = 3;
  spec.end_epoch = 1;
  spec.end_step = 3;
  EXPECT_TRUE(Plan(spec).ok());
}

}  // namespace
}  // namespace stoker::service
