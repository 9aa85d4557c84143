#include "server/service/admission.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/worker_pool.h"
#include "tests/testing/wait_for.h"

namespace stoker::service {
namespace {

using ::stoker::testing::WaitFor;
using ::testing::HasSubstr;

AdmitRequest Request(const std::string& peer, uint64_t bytes) {
  AdmitRequest r;
  r.peer = peer;
  r.bytes = bytes;
  r.what = "a test stream";
  return r;
}

WaitContext Wait(absl::Duration d) { return WaitContext{absl::Now() + d, {}}; }

// 3,000 opens waiting for budget once held 3,017 threads and were counted
// against no bound.
TEST(AdmissionTest, WaitingOpensCountAgainstTheStreamBounds) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(
      &pool, AdmissionLimits{/*max_streams=*/5, /*max_streams_per_peer=*/3,
                             /*memory_budget=*/100});
  // The budget is full: every later open must wait.
  auto first = admission->Admit(Request("q", 100), Wait(absl::ZeroDuration()));
  ASSERT_TRUE(first.ok()) << first.status();

  std::vector<absl::StatusOr<std::shared_ptr<StreamTicket>>> got(4);
  std::vector<std::thread> waiters;
  const auto wait_in = [&](int i, const std::string& peer) {
    waiters.emplace_back([&, i, peer] {
      got[i] = admission->Admit(Request(peer, 10), Wait(absl::Seconds(30)));
    });
    ASSERT_TRUE(WaitFor(
        [&] { return admission->GetStats().waiting_opens == i + 1u; },
        std::chrono::seconds(10)));
  };
  for (int i = 0; i < 3; ++i) wait_in(i, "p");

  // Peer p has 3 waiting: its next open is refused at once, naming the bound.
  auto p = admission->Admit(Request("p", 10), Wait(absl::Seconds(30)));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(p.status().message(), HasSubstr("max_streams_per_peer=3"));
  EXPECT_THAT(p.status().message(), HasSubstr("3 waiting to open"));
  // One open and four waiting fill max_streams for everyone else.
  wait_in(3, "s");
  auto r = admission->Admit(Request("r", 10), Wait(absl::Seconds(30)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("max_streams=5"));
  EXPECT_THAT(r.status().message(), HasSubstr("4 wait to open"));

  first->reset();  // The budget frees up: the waiting ones get in.
  for (std::thread& t : waiters) t.join();
  for (const auto& ticket : got) EXPECT_TRUE(ticket.ok()) << ticket.status();
  EXPECT_EQ(admission->GetStats().waiting_opens, 0u);
  EXPECT_EQ(admission->GetStats().open_streams, 4u);
}

TEST(AdmissionTest, RanksOfAJobMustAgreeOnRaReps) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(&pool, AdmissionLimits{});
  AdmitRequest a = Request("p", 10);
  a.job_id = "job";
  a.plan.dataset = "d";
  a.plan.ra_reps = 4;
  AdmitRequest b = a;
  b.rank = 1;
  b.plan.ra_reps = 2;
  auto first = admission->Admit(a, Wait(absl::ZeroDuration()));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = admission->Admit(b, Wait(absl::ZeroDuration()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("ra_reps"));
  b.plan.ra_reps = 4;
  EXPECT_TRUE(admission->Admit(b, Wait(absl::ZeroDuration())).ok());
}

// A reload (SIGHUP) may point a dataset's name at another pack of the
// same size, or redefine a pipeline, while a job runs: a rank opened after
// it must not join the job with the new one.
TEST(AdmissionTest, RanksOfAJobMustAgreeOnTheSamplesAndThePipeline) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(&pool, AdmissionLimits{});
  AdmitRequest a = Request("p", 10);
  a.job_id = "job";
  a.plan.dataset = "d";
  a.plan.pipeline = "train";
  a.plan.num_samples = 30;
  a.plan.dataset_digest = "00000000000000aa";
  a.plan.pipeline_definition = "decode_image{} | max_decode_pixels=1";
  auto first = admission->Admit(a, Wait(absl::ZeroDuration()));
  ASSERT_TRUE(first.ok()) << first.status();

  AdmitRequest other_pack = a;
  other_pack.rank = 1;
  other_pack.plan.dataset_digest = "00000000000000bb";
  auto refused = admission->Admit(other_pack, Wait(absl::ZeroDuration()));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("other samples"));
  EXPECT_THAT(refused.status().message(), HasSubstr("00000000000000bb"));

  AdmitRequest redefined = a;
  redefined.rank = 1;
  redefined.plan.pipeline_definition = "decode_image{} | max_decode_pixels=2";
  refused = admission->Admit(redefined, Wait(absl::ZeroDuration()));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("redefined"));

  AdmitRequest same = a;
  same.rank = 1;
  EXPECT_TRUE(admission->Admit(same, Wait(absl::ZeroDuration())).ok());
}

TEST(AdmissionTest, AnOpenThatGivesUpWaitingStopsCounting) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(
      &pool, AdmissionLimits{/*max_streams=*/2, /*max_streams_per_peer=*/2,
                             /*memory_budget=*/100});
  auto first = admission->Admit(Request("q", 100), Wait(absl::ZeroDuration()));
  ASSERT_TRUE(first.ok());
  auto late =
      admission->Admit(Request("p", 10), Wait(absl::Milliseconds(100)));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(late.status().message(), HasSubstr("memory_budget"));
  EXPECT_EQ(admission->GetStats().waiting_opens, 0u);
  first->reset();
  auto again = admission->Admit(Request("p", 10), Wait(absl::ZeroDuration()));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(AdmissionTest, ABudgetRefusalNamesWhatIsInUseAndAsked) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(
      &pool, AdmissionLimits{/*max_streams=*/8, /*max_streams_per_peer=*/8,
                             /*memory_budget=*/100});
  auto first = admission->Admit(Request("p", 60), Wait(absl::ZeroDuration()));
  ASSERT_TRUE(first.ok()) << first.status();
  // No wait asked for: refused at once; the bytes held stay as they were.
  auto over = admission->Admit(Request("p", 50), Wait(absl::ZeroDuration()));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("memory_budget"));
  EXPECT_THAT(over.status().message(), HasSubstr("a test stream"));
  EXPECT_EQ(admission->GetStats().bytes_reserved, 60u);
  // What fits is admitted; a reservation that no stream owns counts too.
  auto fits = admission->Admit(Request("p", 40), Wait(absl::ZeroDuration()));
  ASSERT_TRUE(fits.ok()) << fits.status();
  auto run = admission->Reserve(1, "a shared run");
  EXPECT_EQ(run.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(run.status().message(), HasSubstr("a shared run"));
  fits->reset();
  run = admission->Reserve(40, "a shared run");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(admission->GetStats().bytes_reserved, 100u);
  EXPECT_EQ(admission->GetStats().bytes_high_water, 100u);
}

// Fairness: the streams of one job share one pool group, so the job gets
// one fair share however many ranks it runs here, with the config's weight.
TEST(AdmissionTest, TheStreamsOfAJobShareOneGroupWithItsWeight) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(&pool, AdmissionLimits{});
  admission->SetJobWeights({{"heavy", 4.0}});
  AdmitRequest a = Request("p", 10);
  a.job_id = "heavy";
  a.weight = 1.0;  // The config's weight wins over the request's.
  AdmitRequest b = a;
  b.rank = 1;
  AdmitRequest other = Request("p", 10);
  other.job_id = "light";
  other.weight = 2.0;
  auto ta = admission->Admit(a, Wait(absl::ZeroDuration()));
  auto tb = admission->Admit(b, Wait(absl::ZeroDuration()));
  auto tc = admission->Admit(other, Wait(absl::ZeroDuration()));
  ASSERT_TRUE(ta.ok() && tb.ok() && tc.ok());
  EXPECT_EQ((*ta)->group(), (*tb)->group());
  EXPECT_NE((*ta)->group(), (*tc)->group());
  EXPECT_EQ((*ta)->weight(), 4.0);
  EXPECT_EQ((*tc)->weight(), 2.0);
  EXPECT_EQ(admission->GetStats().jobs, 2u);
}

// A rank that reconnects at once may race the end of its old stream: its
// open waits for the old one's ticket to go, then gets in.
TEST(AdmissionTest, ARankReopenedWaitsForItsOldStreamToEnd) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(&pool, AdmissionLimits{});
  AdmitRequest r = Request("p", 10);
  r.job_id = "job";
  auto old = admission->Admit(r, Wait(absl::ZeroDuration()));
  ASSERT_TRUE(old.ok()) << old.status();
  bool waiting = false;
  auto again = admission->TryAdmit(r, &waiting);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(waiting) << "a rank's old stream ending is worth a wait";
  EXPECT_EQ(admission->GetStats().waiting_opens, 1u);
  old->reset();
  again = admission->TryAdmit(r, &waiting);
  EXPECT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(waiting);
  EXPECT_EQ(admission->GetStats().waiting_opens, 0u);
}

TEST(AdmissionTest, ShutdownWakesAndRefusesEveryWaitingOpen) {
  pipeline::WorkerPool pool(1);
  auto admission = std::make_shared<Admission>(
      &pool, AdmissionLimits{/*max_streams=*/8, /*max_streams_per_peer=*/8,
                             /*memory_budget=*/100});
  auto first = admission->Admit(Request("p", 100), Wait(absl::ZeroDuration()));
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::shared_ptr<StreamTicket>> waited;
  std::thread waiter([&] {
    waited = admission->Admit(Request("p", 10), Wait(absl::Seconds(60)));
  });
  ASSERT_TRUE(WaitFor([&] { return admission->GetStats().waiting_opens == 1; },
                      std::chrono::seconds(10)));
  admission->Shutdown();
  waiter.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace stoker::service
