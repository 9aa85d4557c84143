// The shm transport end to end: the C++ client reading batches in place from
// the daemon's shared-memory ring.
#include <dirent.h>

#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.grpc.pb.h"
#include "tests/testing/consume.h"
#include "tests/testing/test_server.h"
#include "tests/testing/wait_for.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;
using testing::TestServerOptions;

StreamOptions Options(const std::string& transport) {
  return testing::TestStream("train", 8, /*seed=*/3, /*epochs=*/2, transport);
}

// All batches of a stream, checking that it ended normally.
std::vector<std::string> ReadAll(const std::string& target,
                                 const StreamOptions& o, std::string* used) {
  testing::Consumed c = testing::Consume(target, o);
  EXPECT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
  *used = c.transport;
  return c.batches;
}

int OpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n;
}

using ShmTest = testing::TestServerTest;

// The open of an endless shm stream of dataset `train` (seed 3, hold 1), as
// a client that writes the protocol itself sends it: no notice socket, so
// batches come on the call.
v1::StreamRequest RawShmOpen(const std::string& pipeline, uint32_t batch_size,
                             uint32_t prefetch) {
  v1::StreamRequest open;
  open.mutable_open()->set_dataset("train");
  open.mutable_open()->set_pipeline(pipeline);
  open.mutable_open()->set_batch_size(batch_size);
  open.mutable_open()->set_seed(3);
  open.mutable_open()->set_epochs(0);
  open.mutable_open()->set_prefetch(prefetch);
  open.mutable_open()->set_hold(1);
  open.mutable_open()->set_transport(v1::TRANSPORT_SHM);
  return open;
}

TEST_F(ShmTest, ShmBatchesAreByteIdenticalToGrpcBatches) {
  std::string used_grpc, used_shm;
  const auto grpc = ReadAll(server_->target(), Options("grpc"), &used_grpc);
  const auto shm = ReadAll(server_->target(), Options("shm"), &used_shm);
  EXPECT_EQ(used_grpc, "grpc");
  EXPECT_EQ(used_shm, "shm");
  ASSERT_EQ(grpc.size(), 14u);
  EXPECT_EQ(grpc, shm);
}

TEST_F(ShmTest, HeldBatchesKeepTheirSlotsUntilReleased) {
  StreamOptions o = Options("shm");
  o.prefetch = 2;
  o.hold = 2;
  o.epochs = 3;
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int read = testing::ReadHolding(**stream, 2, testing::BatchBytes);
  EXPECT_EQ(read, 21);
}

// The client sends acks two to a message, keeping a lone one back, but
// never when the daemon needs that slot: with two slots (prefetch 1 +
// hold 1), one batch held and one released, the released one's ack is what
// lets the next batch come. (Without that rule this test waits forever.)
TEST_F(ShmTest, AKeptBackAckGoesOutWhenTheRingNeedsItsSlot) {
  StreamOptions o = Options("shm");
  o.prefetch = 1;
  o.hold = 1;
  o.batch_size = 2;
  o.epochs = 1;
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Batch a, b;
  std::vector<uint64_t> steps;
  for (;;) {
    // b stays held while a is released and replaced, and the other way on.
    if (!(*stream)->Next(&a).ok()) break;
    steps.push_back(a.step());
    std::swap(a, b);
  }
  EXPECT_EQ(steps.size(), 25u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], i);
}

TEST_F(ShmTest, ClientThatLeavesFreesItsRing) {
  const int fds_before = OpenFds();
  {
    auto client = Client::Connect(server_->target());
    StreamOptions o = Options("shm");
    o.epochs = 0;
    auto stream = client->OpenStream(o);
    ASSERT_TRUE(stream.ok()) << stream.status();
    Batch batch;
    ASSERT_TRUE((*stream)->Next(&batch).ok());
    ASSERT_TRUE((*stream)->Next(&batch).ok());
  }
  service::StreamService* svc = server_->server()->stream_service();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while ((svc->GetStats().open_streams != 0 || OpenFds() > fds_before) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(svc->GetStats().open_streams, 0u);
  EXPECT_EQ(svc->GetStats().bytes_reserved, 0u);
  // The daemon's memfd and the client's connection are closed again.
  EXPECT_LE(OpenFds(), fds_before);
}

// The protocol under the client: a ring of two slots (prefetch 1, hold 1)
// goes on only as acks free its slots, so reading past it proves that every
// ack of an AckList was taken, and the daemon counts each one.
TEST_F(ShmTest, AckListFreesEverySlotItNamesAndCountsEachAck) {
  auto stub = v1::Stoker::NewStub(
      grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  auto rw = stub->Stream(&context);
  ASSERT_TRUE(rw->Write(RawShmOpen("train", /*batch_size=*/2, /*prefetch=*/1)));
  v1::StreamResponse response;
  ASSERT_TRUE(rw->Read(&response));
  ASSERT_TRUE(response.has_header());
  EXPECT_TRUE(response.header().ack_list());
  ASSERT_EQ(response.header().shm().slots(), 2u);
  // Not asked for: the batches come on the call, as older clients expect.
  EXPECT_FALSE(response.header().has_notices());

  auto ack_of = [](const v1::StreamResponse& r, double wait, double busy) {
    v1::Ack ack;
    ack.mutable_position()->set_epoch(r.batch().epoch());
    ack.mutable_position()->set_step(r.batch().step());
    ack.set_wait_seconds(wait);
    ack.set_busy_seconds(busy);
    return ack;
  };
  // Three rounds: fill both slots, then free both in one message.
  for (int round = 0; round < 3; ++round) {
    v1::StreamResponse first, second;
    ASSERT_TRUE(rw->Read(&first));
    ASSERT_TRUE(rw->Read(&second));
    ASSERT_EQ(second.batch().step(), first.batch().step() + 1);
    v1::StreamRequest acks;
    *acks.mutable_acks()->add_acks() = ack_of(first, 0.25, 1.0);
    *acks.mutable_acks()->add_acks() = ack_of(second, 0.25, 1.0);
    ASSERT_TRUE(rw->Write(acks));
  }
  // A single Ack, as older clients send, still frees its slot.
  v1::StreamResponse next;
  ASSERT_TRUE(rw->Read(&next));
  EXPECT_EQ(next.batch().step(), 6u);
  v1::StreamRequest single;
  *single.mutable_ack() = ack_of(next, 0.5, 2.0);
  ASSERT_TRUE(rw->Write(single));
  // Batch 7 took the slot the last AckList freed; the one after it needs
  // the slot the single Ack frees.
  ASSERT_TRUE(rw->Read(&next));
  EXPECT_EQ(next.batch().step(), 7u);
  ASSERT_TRUE(rw->Read(&next));

  // The daemon records each ack's stall figures (acks are read in order:
  // by the time the batch after 7 was sent, all seven had been taken).
  auto client = Client::Connect(server_->target());
  v1::DaemonStats stats;
  ASSERT_TRUE(client->GetStats(&stats).ok());
  ASSERT_EQ(stats.streams_size(), 1);
  EXPECT_EQ(stats.streams(0).acks(), 7u);
  EXPECT_DOUBLE_EQ(stats.streams(0).wait_seconds(), 6 * 0.25 + 0.5);
  EXPECT_DOUBLE_EQ(stats.streams(0).busy_seconds(), 6 * 1.0 + 2.0);
  context.TryCancel();
}

// A client that copies each batch out and releases it at once (copy_out)
// holds none in the ring: the ring, and the memory the stream reserves,
// are prefetch batches, without the hold ones.
TEST_F(ShmTest, ACopyOutClientsRingHasNoHoldSlots) {
  auto stub = v1::Stoker::NewStub(grpc::CreateChannel(
      server_->target(), grpc::InsecureChannelCredentials()));
  service::StreamService* svc = server_->server()->stream_service();
  for (const bool copy_out : {false, true}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    auto rw = stub->Stream(&context);
    v1::StreamRequest open =
        RawShmOpen("train", /*batch_size=*/2, /*prefetch=*/3);
    open.mutable_open()->set_hold(2);
    open.mutable_open()->set_copy_out(copy_out);
    ASSERT_TRUE(rw->Write(open));
    v1::StreamResponse response;
    ASSERT_TRUE(rw->Read(&response));
    ASSERT_TRUE(response.has_header());
    const v1::ShmRing& ring = response.header().shm();
    EXPECT_EQ(ring.slots(), copy_out ? 3u : 5u);
    EXPECT_GE(svc->GetStats().bytes_reserved,
              ring.slots() * ring.slot_bytes() - ring.slots() * 4096);
    EXPECT_LE(svc->GetStats().bytes_reserved, ring.slots() * ring.slot_bytes());
    context.TryCancel();
    // The next round opens the same rank of the same job: wait for this
    // stream to be gone.
    ASSERT_TRUE(
        testing::WaitFor([svc] { return svc->GetStats().open_streams == 0; },
                         std::chrono::seconds(10)));
  }
}

// A consumer that takes each batch as soon as it is built needs few of its
// window's slots: the daemon starts a batch when one of the two it builds
// ahead is finished (not the whole window at once), and reuses the slot
// released last, so the others are never written and cost no memory.
TEST(ShmSlotsTest, AConsumerThatKeepsUpWritesFewOfItsSlots) {
  // Batches that take the daemon far longer to build (1024x1024 each) than
  // this thread to read and ack.
  TestServerOptions options;
  options.workers = 1;
  options.extra_yaml =
      "  large:\n"
      "    - decode_jpeg: {}\n"
      "    - resize: {size: 1024}\n"
      "    - center_crop: {size: 1024}\n"
      "    - normalize: {dtype: uint8}\n";
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Stoker::NewStub(grpc::CreateChannel(
      (*server)->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  auto rw = stub->Stream(&context);
  ASSERT_TRUE(rw->Write(RawShmOpen("large", /*batch_size=*/8, /*prefetch=*/8)));
  v1::StreamResponse response;
  ASSERT_TRUE(rw->Read(&response));
  ASSERT_TRUE(response.has_header());
  ASSERT_EQ(response.header().shm().slots(), 9u);
  std::set<uint32_t> slots;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(rw->Read(&response));
    ASSERT_TRUE(response.has_batch());
    slots.insert(response.batch().slot());
    v1::StreamRequest ack;
    ack.mutable_ack()->mutable_position()->set_epoch(response.batch().epoch());
    ack.mutable_ack()->mutable_position()->set_step(response.batch().step());
    ASSERT_TRUE(rw->Write(ack));
  }
  // Held, sent, and two building: four, or a few more when this thread is
  // slow to ack. Starting the whole window at once wrote all nine.
  EXPECT_LE(slots.size(), 6u);
  context.TryCancel();
}

TEST_F(ShmTest, AShortStreamWaitsForItsClientToFetchTheRing) {
  // A one-batch stream is done as soon as its batch is sent: it must not
  // end (and free its ring) before the client has fetched the ring.
  for (int round = 0; round < 10; ++round) {
    std::vector<std::thread> threads;
    for (uint32_t rank = 0; rank < 4; ++rank) {
      threads.emplace_back([&, rank] {
        StreamOptions o = Options("shm");
        o.epochs = 1;
        o.batch_size = 12;
        o.drop_last = true;
        o.rank = rank;
        o.world_size = 4;  // 50 samples: one step of 12 a rank.
        o.job_id = absl::StrCat("short-", round);
        testing::Consumed c = testing::Consume(server_->target(), o);
        EXPECT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
        EXPECT_EQ(c.ids.size(), 12u);
      });
    }
    for (auto& t : threads) t.join();
  }
}

TEST_F(ShmTest, CudaIpcWithoutGpuDeliveryIsFailedPreconditionWithTheReason) {
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(Options("cuda_ipc"));
  ASSERT_TRUE(absl::IsFailedPrecondition(stream.status())) << stream.status();
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr("cuda_ipc"));
}

TEST_F(ShmTest, FallbackListEndsOnTheFirstTransportThatWorks) {
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(Options("cuda_ipc,shm,grpc"));
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->info().transport, "shm");
  EXPECT_THAT((*stream)->info().fallbacks, HasSubstr("cuda_ipc: "));
}

TEST(ShmTcpTest, WithoutAUnixSocketShmIsRefusedAndAutoFallsBackToGrpc) {
  TestServerOptions options;
  options.tcp_only = true;
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect((*server)->target());
  auto shm = client->OpenStream(Options("shm"));
  ASSERT_TRUE(absl::IsFailedPrecondition(shm.status())) << shm.status();
  EXPECT_THAT(std::string(shm.status().message()), HasSubstr("listen.unix"));

  std::string used;
  const auto batches = ReadAll((*server)->target(), Options("auto"), &used);
  EXPECT_EQ(used, "grpc");
  EXPECT_EQ(batches.size(), 14u);
}

}  // namespace
}  // namespace stoker
