// End-to-end tests of the daemon over a unix socket in a temp dir: the C++
// client against an in-process StokerServer.
#include <algorithm>
#include <numeric>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/consume.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::Consume;
using testing::Consumed;
using testing::TestServer;
using testing::TestServerOptions;

StreamOptions Options(uint32_t batch_size, uint64_t epochs = 1) {
  return testing::TestStream("train", batch_size, /*seed=*/7, epochs);
}

std::vector<uint64_t> Iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

using StreamTest = testing::TestServerTest;

TEST_F(StreamTest, OneEpochDeliversEverySampleExactlyOnce) {
  Consumed c = Consume(server_->target(), Options(8));
  ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  EXPECT_EQ(c.batches.size(), 7u);  // 50 samples, batches of 8.
  std::vector<uint64_t> sorted = c.ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_THAT(sorted, ElementsAreArray(Iota(50)));
  EXPECT_NE(c.ids, Iota(50)) << "epoch is not shuffled";
}

TEST_F(StreamTest, BatchTensorsHaveThePipelineShapes) {
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(Options(8));
  ASSERT_TRUE(stream.ok()) << stream.status();
  Batch batch;
  ASSERT_TRUE((*stream)->Next(&batch).ok());
  const TensorView* image = batch.Find("image");
  const TensorView* label = batch.Find("label");
  ASSERT_NE(image, nullptr);
  ASSERT_NE(label, nullptr);
  EXPECT_EQ(image->dtype, DType::kFloat32);
  EXPECT_THAT(image->shape, ElementsAreArray({8, 3, 32, 32}));
  EXPECT_EQ(image->size, 8u * 3 * 32 * 32 * 4);
  EXPECT_EQ(label->dtype, DType::kInt64);
  EXPECT_THAT(label->shape, ElementsAreArray({8}));
  const int64_t* labels = reinterpret_cast<const int64_t*>(label->data);
  for (int i = 0; i < 8; ++i) {
    EXPECT_GE(labels[i], 0);
    EXPECT_LT(labels[i], 3);
  }
  EXPECT_EQ((*stream)->info().steps_per_epoch, 7u);
}

TEST_F(StreamTest, ThreeRanksTogetherCoverAnEpochExactlyOnce) {
  std::vector<uint64_t> all;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    StreamOptions o = Options(4);
    o.rank = rank;
    o.world_size = 3;
    o.job_id = "job";
    Consumed c = Consume(server_->target(), o);
    ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
    all.insert(all.end(), c.ids.begin(), c.ids.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAreArray(Iota(50)));
}

TEST_F(StreamTest, DropLastLeavesOutOnlyTheTailAcrossRanks) {
  std::set<uint64_t> seen;
  size_t total = 0;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    StreamOptions o = Options(4);
    o.rank = rank;
    o.world_size = 3;
    o.drop_last = true;
    Consumed c = Consume(server_->target(), o);
    ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
    EXPECT_EQ(c.ids.size(), 16u);  // floor(50 / 12) = 4 steps of 4.
    total += c.ids.size();
    seen.insert(c.ids.begin(), c.ids.end());
  }
  EXPECT_EQ(total, 48u);
  EXPECT_EQ(seen.size(), 48u);
}

TEST_F(StreamTest, SameRequestGivesByteIdenticalBatches) {
  Consumed a = Consume(server_->target(), Options(8));
  Consumed b = Consume(server_->target(), Options(8));
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.batches, b.batches);
  StreamOptions other = Options(8);
  other.seed = 8;
  EXPECT_NE(Consume(server_->target(), other).ids, a.ids);
}

TEST_F(StreamTest, EpochsDifferAndPositionsAdvance) {
  Consumed c = Consume(server_->target(), Options(10, /*epochs=*/2));
  ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  ASSERT_EQ(c.positions.size(), 10u);
  EXPECT_EQ(c.positions[4], std::make_pair(uint64_t{0}, uint64_t{4}));
  EXPECT_EQ(c.positions[5], std::make_pair(uint64_t{1}, uint64_t{0}));
  const std::vector<uint64_t> first(c.ids.begin(), c.ids.begin() + 50);
  const std::vector<uint64_t> second(c.ids.begin() + 50, c.ids.end());
  EXPECT_NE(first, second);
  EXPECT_EQ(c.next.epoch, 2u);
  EXPECT_EQ(c.next.step, 0u);
}

TEST_F(StreamTest, ResumeAtPositionContinuesExactly) {
  const StreamOptions o = Options(6, /*epochs=*/2);
  Consumed whole = Consume(server_->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(whole.status)) << whole.status;

  Consumed head = Consume(server_->target(), o, /*max_batches=*/11);
  ASSERT_TRUE(head.status.ok()) << head.status;
  EXPECT_EQ(head.next.epoch, 1u);  // 9 steps per epoch.
  EXPECT_EQ(head.next.step, 2u);
  StreamOptions resumed = o;
  resumed.start = head.next;
  Consumed tail = Consume(server_->target(), resumed);
  ASSERT_TRUE(absl::IsOutOfRange(tail.status)) << tail.status;

  std::vector<std::string> joined = head.batches;
  joined.insert(joined.end(), tail.batches.begin(), tail.batches.end());
  EXPECT_EQ(joined, whole.batches);
}

// A chunk [start, end) is exactly those batches of the whole stream, so
// streams of adjacent chunks together are the whole stream, byte for byte.
TEST_F(StreamTest, AStreamWithAnEndSendsExactlyItsChunk) {
  const StreamOptions o = Options(6, /*epochs=*/2);  // 9 steps per epoch.
  Consumed whole = Consume(server_->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(whole.status)) << whole.status;
  ASSERT_EQ(whole.batches.size(), 18u);

  std::vector<std::string> joined;
  const std::vector<Position> bounds = {{0, 0}, {0, 4}, {1, 1}, {1, 2}, {2, 0}};
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    StreamOptions chunk = o;
    chunk.start = bounds[i];
    chunk.end = bounds[i + 1];
    Consumed c = Consume(server_->target(), chunk);
    ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
    ASSERT_FALSE(c.positions.empty());
    EXPECT_EQ(c.positions.front(),
              std::make_pair(bounds[i].epoch, bounds[i].step));
    EXPECT_EQ(c.next.epoch, bounds[i + 1].epoch);
    EXPECT_EQ(c.next.step, bounds[i + 1].step);
    joined.insert(joined.end(), c.batches.begin(), c.batches.end());
  }
  EXPECT_EQ(joined, whole.batches);
}

TEST_F(StreamTest, TheSoonerOfEndAndEpochsEndsTheStream) {
  StreamOptions o = Options(6, /*epochs=*/1);
  o.end = Position{3, 0};  // After the one epoch: the epoch ends it.
  Consumed c = Consume(server_->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  EXPECT_EQ(c.batches.size(), 9u);
  o.epochs = 0;  // Endless: the end ends it.
  o.end = Position{1, 3};
  c = Consume(server_->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  EXPECT_EQ(c.batches.size(), 12u);
  // At the end already, as a client reconnecting after the last batch is:
  // nothing to send, and no error.
  o.start = Position{1, 3};
  c = Consume(server_->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  EXPECT_TRUE(c.batches.empty());
}

TEST_F(StreamTest, AnEndBeforeTheStartOrOutsideItsEpochIsInvalidArgument) {
  StreamOptions o = Options(6, /*epochs=*/0);
  o.start = Position{1, 2};
  o.end = Position{1, 1};
  absl::Status s = Consume(server_->target(), o).status;
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("end position (epoch 1, step 1) is "
                                     "before the start (epoch 1, step 2)"));
  o.end = Position{2, 9};
  s = Consume(server_->target(), o).status;
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("outside its epoch: 9 steps per epoch"));
}

// A shared run is endless; a stream on it still ends at its own end, and
// its last batches are copies it may keep (as at the end of epochs).
TEST_F(StreamTest, ASharedStreamEndsAtItsEnd) {
  StreamOptions o = Options(6, /*epochs=*/0);
  o.share = true;
  o.end = Position{0, 5};
  Consumed c = Consume(server_->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  StreamOptions alone = o;
  alone.share = false;
  EXPECT_EQ(c.batches, Consume(server_->target(), alone).batches);
  EXPECT_EQ(c.batches.size(), 5u);
  EXPECT_FALSE(c.shared.back());
}

TEST(StreamWorkersTest, BatchesAreIdenticalWithOneAndTwoWorkers) {
  std::vector<std::vector<std::string>> runs;
  for (int workers : {1, 2}) {
    TestServerOptions options;
    options.workers = workers;
    auto server = TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    StreamOptions o = Options(8, 2);
    o.prefetch = 3;
    Consumed c = Consume((*server)->target(), o);
    ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
    runs.push_back(c.batches);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST_F(StreamTest, UnknownDatasetIsNotFoundAndTheDaemonKeepsServing) {
  StreamOptions o = Options(8);
  o.dataset = "nope";
  Consumed c = Consume(server_->target(), o);
  EXPECT_TRUE(absl::IsNotFound(c.status)) << c.status;
  EXPECT_THAT(c.status.message(), HasSubstr("'nope'"));
  o = Options(8);
  o.pipeline = "nope";
  EXPECT_TRUE(absl::IsNotFound(Consume(server_->target(), o).status));
  EXPECT_TRUE(absl::IsOutOfRange(Consume(server_->target(), Options(8)).status));
}

TEST_F(StreamTest, BatchSizeOutsideItsBoundIsInvalidArgument) {
  Consumed zero = Consume(server_->target(), Options(0));
  EXPECT_TRUE(absl::IsInvalidArgument(zero.status)) << zero.status;
  Consumed big = Consume(server_->target(), Options(100000));
  EXPECT_TRUE(absl::IsInvalidArgument(big.status)) << big.status;
  EXPECT_THAT(big.status.message(), HasSubstr("max_batch_size=256"));
}

TEST(StreamBudgetTest, StreamThatDoesNotFitTheBudgetIsResourceExhausted) {
  TestServerOptions options;
  options.memory_budget = "16MiB";
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  // A batch of 256 float32 3x32x32 images is 3 MiB; 4 in flight fit.
  StreamOptions o = Options(256, /*epochs=*/0);
  o.prefetch = 4;
  auto client = Client::Connect((*server)->target());
  auto first = client->OpenStream(o);
  ASSERT_TRUE(first.ok()) << first.status();
  // The second waits for budget as long as it allows, then is refused.
  o.open_timeout = std::chrono::milliseconds(300);
  const auto asked = std::chrono::steady_clock::now();
  Consumed second = Consume((*server)->target(), o);
  EXPECT_GE(std::chrono::steady_clock::now() - asked,
            std::chrono::milliseconds(250));
  EXPECT_TRUE(absl::IsResourceExhausted(second.status)) << second.status;
  EXPECT_THAT(std::string(second.status.message()),
              HasSubstr("memory_budget 16.0 MiB has 12.0 MiB in use; this "
                        "stream (4 batches of 3.0 MiB) asks for 12.0 MiB"));
  first->reset();
  // Once the first stream is gone its memory is free again.
  service::StreamService* svc = (*server)->server()->stream_service();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (svc->GetStats().bytes_reserved != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(Consume((*server)->target(), o, 1).status.ok());
}

TEST_F(StreamTest, StartBeyondTheEpochIsInvalidArgument) {
  StreamOptions o = Options(8);
  o.start = Position{0, 7};
  EXPECT_TRUE(absl::IsInvalidArgument(Consume(server_->target(), o).status));
}

TEST_F(StreamTest, ClientThatLeavesMidStreamFreesEverything) {
  {
    StreamOptions o = Options(8, /*epochs=*/0);
    Consumed c = Consume(server_->target(), o, /*max_batches=*/3);
    ASSERT_TRUE(c.status.ok()) << c.status;
  }  // The client and its stream are gone.
  service::StreamService* svc = server_->server()->stream_service();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (svc->GetStats().open_streams != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(svc->GetStats().open_streams, 0u);
  EXPECT_EQ(svc->GetStats().bytes_reserved, 0u);
}

TEST_F(StreamTest, ListsDatasetsAndPipelines) {
  auto client = Client::Connect(server_->target());
  auto datasets = client->ListDatasets();
  ASSERT_TRUE(datasets.ok()) << datasets.status();
  ASSERT_EQ(datasets->size(), 1u);
  EXPECT_EQ((*datasets)[0].name, "train");
  EXPECT_EQ((*datasets)[0].num_samples, 50u);
  EXPECT_EQ((*datasets)[0].classes.size(), 3u);
  auto pipelines = client->ListPipelines();
  ASSERT_TRUE(pipelines.ok()) << pipelines.status();
  ASSERT_EQ(pipelines->size(), 2u);
  EXPECT_EQ((*pipelines)[0].name, "train");
  EXPECT_EQ((*pipelines)[0].ops.front(), "decode_jpeg");
}

// The digest tells packs apart: the same dataset dir served by a second
// daemon has the same one, another pack of the same name does not.
TEST_F(StreamTest, TheManifestDigestIsEqualOnlyForTheSamePack) {
  auto digest_of = [](const std::string& target) {
    auto datasets = Client::Connect(target)->ListDatasets();
    EXPECT_TRUE(datasets.ok()) << datasets.status();
    return datasets.ok() && datasets->size() == 1
               ? (*datasets)[0].manifest_digest
               : std::string();
  };
  const std::string mine = digest_of(server_->target());
  EXPECT_THAT(mine, ::testing::MatchesRegex("[0-9a-f]{16}"));
  TestServerOptions same;
  same.dataset_dir = server_->dataset_dir();
  auto twin = TestServer::Start(same);
  ASSERT_TRUE(twin.ok()) << twin.status();
  EXPECT_EQ(digest_of((*twin)->target()), mine);
  TestServerOptions other;
  other.num_samples = 51;
  auto different = TestServer::Start(other);
  ASSERT_TRUE(different.ok()) << different.status();
  EXPECT_NE(digest_of((*different)->target()), mine);
}

}  // namespace
}  // namespace stoker
