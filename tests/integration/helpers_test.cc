// A node daemon with a helper daemon (docs/remote-design.md), both
// in-process: the helper on TCP 127.0.0.1:0, the node on a unix socket,
// serving the same pack. The node's streams must be byte for byte what the
// node alone (or the helper alone) sends, whatever the helper does.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/remote/helper_pool.h"
#include "stoker/client.h"
#include "tests/testing/consume.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/test_server.h"
#include "tests/testing/wait_for.h"

namespace stoker {
namespace {

using testing::Consume;
using testing::Consumed;
using testing::TestServer;
using testing::TestServerOptions;
using testing::WaitFor;

std::unique_ptr<TestServer> StartOrDie(const TestServerOptions& o) {
  auto server = TestServer::Start(o);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// A node serving `helper`'s dataset, with `helper` as its only helper and
// `policy` for the rest of its `helpers` map; `extra` adds pipelines.
std::unique_ptr<TestServer> StartNode(
    const TestServer& helper, const std::string& extra = "",
    const std::string& policy =
        "placement: remote_first, chunk_steps: 2, stall_seconds: 2") {
  TestServerOptions o;
  o.dataset_dir = helper.dataset_dir();
  o.workers = 1;
  o.extra_yaml = absl::StrCat(extra, "helpers: {addresses: ['",
                              helper.target(), "'], ", policy, "}\n");
  return StartOrDie(o);
}

bool HelperUp(const TestServer& node) {
  std::vector<service::HelperStats> h =
      const_cast<TestServer&>(node).server()->HelperStats();
  return h.size() == 1 && h[0].up;
}

int64_t NodeCount(TestServer& node, const char* name) {
  int64_t total = 0;
  for (const metrics::LabelStats& l : node.server()->Stats().labels) {
    for (const service::CountDef& def : service::kCounts) {
      if (std::string(def.name) == name) total += l.counts[def.count];
    }
  }
  return total;
}

StreamOptions Options(uint64_t epochs = 2) {
  StreamOptions o = testing::TestStream("train", 4, /*seed=*/3, epochs);
  o.prefetch = 4;
  return o;
}

// `node`, once it sees `helper` up, streams `o` byte for byte as `helper`
// does alone, with batches from the helper and none rebuilt.
void ExpectTheHelpersBytesFromTheNode(const TestServer& helper,
                                      TestServer& node,
                                      const StreamOptions& o) {
  const Consumed reference = Consume(helper.target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;
  ASSERT_TRUE(
      WaitFor([&] { return HelperUp(node); }, std::chrono::seconds(10)));
  const Consumed got = Consume(node.target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(got.status)) << got.status;
  EXPECT_EQ(got.batches, reference.batches);
  EXPECT_EQ(got.ids, reference.ids);
  EXPECT_GT(NodeCount(node, "remote_batches"), 0);
  EXPECT_EQ(NodeCount(node, "remote_rebuilt"), 0);
}

class HelpersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestServerOptions o;
    o.tcp_only = true;
    o.workers = 1;
    helper_ = StartOrDie(o);
    ASSERT_NE(helper_, nullptr);
  }
  std::unique_ptr<TestServer> helper_;
};

TEST_F(HelpersTest, TheNodeSendsWhatTheHelperBuiltByteForByte) {
  std::unique_ptr<TestServer> node = StartNode(*helper_);
  ASSERT_NE(node, nullptr);
  ExpectTheHelpersBytesFromTheNode(*helper_, *node, Options());
  const service::HelperStats h = node->server()->HelperStats()[0];
  EXPECT_GT(h.batches, 0u);
  EXPECT_EQ(h.failures, 0u);
  // The helper sent uint8 32x32x3 renderings (and int64 labels), a quarter
  // of the float32 the node delivers; the node normalized them.
  ASSERT_GT(h.samples, 0u);
  EXPECT_LT(h.payload_bytes / h.samples, 32 * 32 * 3 + 8 + 64);
  EXPECT_GE(h.payload_bytes / h.samples, 32 * 32 * 3 + 8);
  EXPECT_GT(h.copy_seconds, 0);
}

TEST_F(HelpersTest, WithoutRawTheHelperSendsTheFinishedOutputs) {
  std::unique_ptr<TestServer> node = StartNode(
      *helper_, "", "placement: remote_first, chunk_steps: 2, raw: false");
  ASSERT_NE(node, nullptr);
  ExpectTheHelpersBytesFromTheNode(*helper_, *node, Options());
  const service::HelperStats h = node->server()->HelperStats()[0];
  ASSERT_GT(h.samples, 0u);
  EXPECT_GE(h.payload_bytes / h.samples, 32 * 32 * 3 * 4 + 8);
}

// MixUp mixes the normalized images: the node runs it on the renderings it
// finished, with the batch's generator, as it would on its own batches.
TEST_F(HelpersTest, ABatchOpRunsOnTheRenderingsFinishedHere) {
  const std::string mix =
      "  mix:\n"
      "    - decode_jpeg: {}\n"
      "    - random_resized_crop: {size: 16}\n"
      "    - random_flip: {}\n"
      "    - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\n"
      "    - layout: chw\n"
      "    - mixup_cutmix: {num_classes: 3, label_smoothing: 0.1}\n";
  TestServerOptions h;
  h.tcp_only = true;
  h.workers = 1;
  h.extra_yaml = mix;
  std::unique_ptr<TestServer> helper = StartOrDie(h);
  ASSERT_NE(helper, nullptr);
  StreamOptions o = Options();
  o.pipeline = "mix";
  std::unique_ptr<TestServer> node = StartNode(*helper, mix);
  ASSERT_NE(node, nullptr);
  ExpectTheHelpersBytesFromTheNode(*helper, *node, o);
}

TEST_F(HelpersTest, ZstdBatchesFromTheHelperDecodeToTheSameBytes) {
  std::unique_ptr<TestServer> node = StartNode(
      *helper_, "", "placement: remote_first, chunk_steps: 2, compress: zstd");
  ASSERT_NE(node, nullptr);
  ExpectTheHelpersBytesFromTheNode(*helper_, *node, Options());
  EXPECT_GT(NodeCount(*helper_, "compressed_batches"), 0);
  const service::HelperStats h = node->server()->HelperStats()[0];
  EXPECT_LT(h.wire_bytes, h.payload_bytes);
}

// Any grpc client may ask for compressed batches; they decode to the bytes
// of an uncompressed stream.
TEST_F(HelpersTest, AGrpcClientGetsTheSameBytesCompressedOrNot) {
  const Consumed plain = Consume(helper_->target(), Options());
  ASSERT_TRUE(absl::IsOutOfRange(plain.status)) << plain.status;
  StreamOptions zstd = Options();
  zstd.compression = Compression::kZstd;
  const Consumed packed = Consume(helper_->target(), zstd);
  ASSERT_TRUE(absl::IsOutOfRange(packed.status)) << packed.status;
  EXPECT_EQ(packed.batches, plain.batches);
  EXPECT_EQ(packed.ids, plain.ids);
  EXPECT_GT(NodeCount(*helper_, "compressed_batches"), 0);
  // Auto compresses only batches that wait to be sent; the bytes are the
  // same either way.
  StreamOptions automatic = Options();
  automatic.compression = Compression::kAuto;
  const Consumed maybe = Consume(helper_->target(), automatic);
  ASSERT_TRUE(absl::IsOutOfRange(maybe.status)) << maybe.status;
  EXPECT_EQ(maybe.batches, plain.batches);
}

// helpers.dns: the node finds its helper through a name (localhost, from
// /etc/hosts, as a headless Service's name lists its pods) and uses it.
TEST_F(HelpersTest, ANodeFindsItsHelperByDnsName) {
  const Consumed reference = Consume(helper_->target(), Options());
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;
  const std::string target = helper_->target();  // 127.0.0.1:PORT
  const std::string port = target.substr(target.rfind(':') + 1);
  TestServerOptions o;
  o.dataset_dir = helper_->dataset_dir();
  o.workers = 1;
  o.extra_yaml = absl::StrCat(
      "helpers: {dns: 'localhost:", port,
      "', placement: remote_first, chunk_steps: 2, stall_seconds: 2}\n");
  std::unique_ptr<TestServer> node = StartOrDie(o);
  ASSERT_NE(node, nullptr);
  // localhost may also be ::1, where nothing listens: that one stays down.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const service::HelperStats& h : node->server()->HelperStats()) {
          if (h.address == target && h.up) return true;
        }
        return false;
      },
      std::chrono::seconds(10)));
  const Consumed got = Consume(node->target(), Options());
  ASSERT_TRUE(absl::IsOutOfRange(got.status)) << got.status;
  EXPECT_EQ(got.batches, reference.batches);
  EXPECT_EQ(got.ids, reference.ids);
  EXPECT_GT(NodeCount(*node, "remote_batches"), 0);
}

TEST_F(HelpersTest, AHelperWithAnotherPipelineOfTheSameNameIsNotUsed) {
  // The node's `train` crops to 24, the helper's to 32: the helper's
  // batches do not have the node's shapes and are built here instead.
  TestServerOptions o;
  o.dataset_dir = helper_->dataset_dir();
  o.workers = 1;
  o.extra_yaml =
      "  small:\n"
      "    - decode_jpeg: {}\n"
      "    - random_resized_crop: {size: 24}\n";
  std::unique_ptr<TestServer> alone = StartOrDie(o);
  ASSERT_NE(alone, nullptr);
  StreamOptions small = Options();
  small.pipeline = "small";
  const Consumed reference = Consume(alone->target(), small);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;

  TestServerOptions h;
  h.tcp_only = true;
  h.dataset_dir = helper_->dataset_dir();
  h.extra_yaml =
      "  small:\n"
      "    - decode_jpeg: {}\n"
      "    - random_resized_crop: {size: 32}\n";
  std::unique_ptr<TestServer> other = StartOrDie(h);
  ASSERT_NE(other, nullptr);
  std::unique_ptr<TestServer> node = StartNode(*other, o.extra_yaml);
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(
      WaitFor([&] { return HelperUp(*node); }, std::chrono::seconds(10)));
  const Consumed got = Consume(node->target(), small);
  ASSERT_TRUE(absl::IsOutOfRange(got.status)) << got.status;
  EXPECT_EQ(got.batches, reference.batches);
  EXPECT_EQ(NodeCount(*node, "remote_batches"), 0);
  EXPECT_GT(NodeCount(*node, "remote_rebuilt"), 0);
  const service::HelperStats stats = node->server()->HelperStats()[0];
  EXPECT_GT(stats.failures, 0u);
  EXPECT_THAT(stats.last_error, ::testing::HasSubstr("tensor 'image'"));
}

TEST_F(HelpersTest, AHelperThatStopsMidStreamLosesAndRepeatsNothing) {
  const Consumed reference = Consume(helper_->target(), Options(4));
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;
  std::unique_ptr<TestServer> node = StartNode(*helper_);
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(
      WaitFor([&] { return HelperUp(*node); }, std::chrono::seconds(10)));
  auto client = Client::Connect(node->target());
  auto stream = client->OpenStream(Options(4));
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::string> batches;
  std::vector<uint64_t> ids;
  Batch batch;
  absl::Status s;
  while ((s = (*stream)->Next(&batch)).ok()) {
    batches.push_back(testing::BatchBytes(batch));
    ids.insert(ids.end(), batch.sample_ids().begin(), batch.sample_ids().end());
    if (batches.size() == 3) helper_->server()->Stop();
  }
  ASSERT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ(batches, reference.batches);
  EXPECT_EQ(ids, reference.ids);
  EXPECT_GT(NodeCount(*node, "remote_batches"), 0);
  EXPECT_FALSE(node->server()->HelperStats()[0].up);
}

TEST(HelpersTypedTest, RaggedFieldsThroughAHelperAreByteForByteWithASkip) {
  // Variable-length tokens, str captions and a corrupt record (skipped):
  // the helper's packed values and offsets land in the node's buffer as
  // the node would have packed them. The batch the helper skipped a record
  // of is built on the node, which decides itself that the record is lost;
  // the helper stays up and builds the chunks after it.
  testing::ScopedTempDir data;
  const std::string dir = data.path() + "/typed";
  const testing::TypedSamples samples = testing::MakeTypedSamples(40);
  ASSERT_TRUE(
      testing::WriteTypedDataset(dir, samples.schema, samples.records).ok());
  ASSERT_TRUE(testing::CorruptRecordOnDisk(dir, 7).ok());
  const std::string raw = "  raw:\n    - drop_fields: []\n";
  TestServerOptions h;
  h.tcp_only = true;
  h.workers = 1;
  h.dataset_dir = dir;
  h.extra_yaml = raw;
  std::unique_ptr<TestServer> helper = StartOrDie(h);
  ASSERT_NE(helper, nullptr);
  StreamOptions o = Options();
  o.pipeline = "raw";
  const Consumed reference = Consume(helper->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(reference.status)) << reference.status;
  ASSERT_FALSE(reference.skipped.empty());
  std::unique_ptr<TestServer> node = StartNode(*helper, raw);
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(
      WaitFor([&] { return HelperUp(*node); }, std::chrono::seconds(10)));
  const Consumed got = Consume(node->target(), o);
  ASSERT_TRUE(absl::IsOutOfRange(got.status)) << got.status;
  EXPECT_EQ(got.batches, reference.batches);
  EXPECT_EQ(got.skipped, reference.skipped);
  EXPECT_GT(NodeCount(*node, "remote_batches"), 0);
  EXPECT_GT(NodeCount(*node, "remote_rebuilt"), 0);
  const service::HelperStats stats = node->server()->HelperStats()[0];
  EXPECT_TRUE(stats.up);
  EXPECT_GT(stats.failures, 0u);
  EXPECT_THAT(stats.last_error, ::testing::HasSubstr("the helper skipped"));
}

// A stream that lets go of its chunk on the chunk's own thread, as Stream
// does in ChunkEnded, after the pool let go of it at shutdown: the reader
// must not join itself (which aborted stokerd at a shutdown in CI), and
// the pool must not return from Stop while the reader still runs.
class LettingGoSink : public service::ChunkSink {
 public:
  absl::Status TakeRemote(uint64_t, uint64_t, const service::RemoteBatch&,
                          service::TakeReport*) override {
    taking_ = true;
    // As Stream::TakeRemote: wait for the stream, give up once cancelled.
    EXPECT_TRUE(WaitFor(
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          return chunk_ != nullptr && chunk_->cancelled();
        },
        std::chrono::seconds(10)));
    return absl::CancelledError("cancelled");
  }
  void ChunkEnded(uint64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    chunk_.reset();
    ended_ = true;
  }
  void Hold(std::shared_ptr<service::RemoteChunk> chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    chunk_ = std::move(chunk);
  }
  bool taking() const { return taking_; }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }

 private:
  std::atomic<bool> taking_{false};
  std::mutex mu_;
  std::shared_ptr<service::RemoteChunk> chunk_;
  bool ended_ = false;
};

TEST_F(HelpersTest, AChunkItsStreamLetsGoOfOnItsOwnThreadEndsCleanly) {
  auto listed = Client::Connect(helper_->target())->ListDatasets();
  ASSERT_TRUE(listed.ok()) << listed.status();
  config::HelperOptions options;
  options.addresses = {helper_->target()};
  options.placement = config::HelperOptions::Placement::kRemoteFirst;
  remote::HelperPool pool(options, [] { return true; });
  pool.Start();
  ASSERT_TRUE(WaitFor([&] { return pool.Stats()[0].up; },
                      std::chrono::seconds(10)));
  service::StreamSpec spec;
  spec.dataset = "train";
  spec.pipeline = "train";
  spec.batch_size = 4;
  spec.seed = 3;
  service::ChunkRequest request;
  request.spec = &spec;
  request.content_digest = (*listed)[0].content_digest;
  request.steps_per_epoch = 13;
  request.begin = 0;
  request.end = 2;
  auto sink = std::make_shared<LettingGoSink>();
  std::shared_ptr<service::RemoteChunk> chunk = pool.Place(request, sink);
  ASSERT_NE(chunk, nullptr);
  sink->Hold(std::move(chunk));
  ASSERT_TRUE(
      WaitFor([&] { return sink->taking(); }, std::chrono::seconds(10)));
  pool.Stop();
  EXPECT_TRUE(sink->ended());
}

}  // namespace
}  // namespace stoker
