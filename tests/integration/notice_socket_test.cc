// The notice socket of an shm stream (NoticeSocket in local_transports.proto):
// the daemon's side spoken to by hand, the C++ client over it, and the client's
// framing on a socketpair.
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "client/lib/shm/notice_socket.h"
#include "client/lib/shm/shm_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.grpc.pb.h"
#include "tests/testing/consume.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;

// Two epochs of batches of 8.
StreamOptions TwoEpochs(const std::string& transport) {
  return testing::TestStream("train", 8, /*seed=*/3, /*epochs=*/2, transport);
}

// ---- The notice socket's protocol, spoken by hand (see NoticeSocket in
// local_transports.proto). Every read is bounded by 20 s, so a daemon that
// never sends fails the test instead of hanging it.

// A connection to `notices.path` past the token; -1 when the daemon did
// not answer 1, with that answer (0 or EOF) in *verdict.
int ConnectNotices(const v1::NoticeSocket& notices, int* verdict) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{};
  tv.tv_sec = 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notices.path().c_str(), sizeof(addr.sun_path) - 1);
  char byte = 0;
  *verdict = -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      send(fd, notices.token().data(), notices.token().size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(notices.token().size()) &&
      recv(fd, &byte, 1, 0) == 1) {
    *verdict = byte;
  }
  if (*verdict != 1) {
    close(fd);
    return -1;
  }
  return fd;
}

// Exactly `n` bytes; false on EOF (or an error) before them.
bool ReadExactly(int fd, char* out, size_t n) {
  while (n > 0) {
    const ssize_t got = recv(fd, out, n, 0);
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// The next frame's bytes; false at EOF.
bool ReadFrame(int fd, std::string* bytes) {
  unsigned char length[4];
  if (!ReadExactly(fd, reinterpret_cast<char*>(length), 4)) return false;
  bytes->resize(length[0] | length[1] << 8 | length[2] << 16 |
                uint32_t{length[3]} << 24);
  return ReadExactly(fd, bytes->data(), bytes->size());
}

bool ReadBatch(int fd, v1::StreamResponse* response) {
  std::string bytes;
  return ReadFrame(fd, &bytes) && response->ParseFromString(bytes) &&
         response->has_batch();
}

// `message` as a frame: its length, 4 bytes little-endian, then itself.
std::string Frame(const google::protobuf::MessageLite& message) {
  std::string frame(4, '\0');
  message.AppendToString(&frame);
  const size_t length = frame.size() - 4;
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(length >> (8 * i));
  return frame;
}

// `message` as one frame, sent in one send().
bool WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  const std::string frame = Frame(message);
  return send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(frame.size());
}


// A Stream call opened by hand: `open` sent and the header read, within
// `seconds` for the whole call.
class RawCall {
 public:
  RawCall(const std::string& target, const v1::StreamRequest& open,
          int seconds)
      : stub_(v1::Stoker::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(seconds));
    rw_ = stub_->Stream(&context_);
    v1::StreamResponse response;
    ok_ = rw_->Write(open) && rw_->Read(&response) && response.has_header();
    header_ = response.header();
  }
  bool ok() const { return ok_; }
  const v1::StreamHeader& header() const { return header_; }
  // The call's status, after checking that no more messages came on it.
  grpc::Status Finish() {
    v1::StreamResponse more;
    EXPECT_FALSE(rw_->Read(&more)) << "a message on the call after the header";
    return rw_->Finish();
  }
  void Cancel() { context_.TryCancel(); }

 private:
  std::unique_ptr<v1::Stoker::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>>
      rw_;
  bool ok_ = false;
  v1::StreamHeader header_;
};

using NoticeTest = testing::TestServerTest;

// Batches over the notice socket are the same as over the call, and the
// client says which way they came.
TEST_F(NoticeTest, ClientReadsBatchesFromTheNoticeSocket) {
  const std::vector<std::string> grpc =
      testing::Consume(server_->target(), TwoEpochs("grpc")).batches;
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(TwoEpochs("shm"));
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->info().transport, "shm");
  EXPECT_TRUE((*stream)->info().notice_socket);
  std::vector<std::string> shm;
  Batch batch;
  absl::Status s;
  while ((s = (*stream)->Next(&batch)).ok()) {
    shm.push_back(testing::BatchBytes(batch));
  }
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  ASSERT_EQ(grpc.size(), 14u);
  EXPECT_EQ(grpc, shm);
  // The grpc transport has no notice socket.
  auto over_grpc = client->OpenStream(TwoEpochs("grpc"));
  ASSERT_TRUE(over_grpc.ok()) << over_grpc.status();
  EXPECT_FALSE((*over_grpc)->info().notice_socket);
}

// A stream that fails in the daemon: the notice socket ends, and Next()
// returns the call's status, not an end of stream.
TEST(NoticeErrorTest, AStreamErrorComesFromTheCallAfterTheSocketEnds) {
  testing::ScopedTempDir data;
  auto dir = testing::MakeTestDataset(data.path(), 40, 2, 2, /*seed=*/3);
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(testing::CorruptRecordOnDisk(*dir, 5).ok());
  testing::TestServerOptions options;
  options.dataset_dir = *dir;
  options.on_corrupt = "fail";
  auto server = testing::TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect((*server)->target());
  StreamOptions o = TwoEpochs("shm");
  o.batch_size = 40;  // One batch holds the whole epoch, and record 5.
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_TRUE((*stream)->info().notice_socket);
  Batch batch;
  const absl::Status s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 5"));
  EXPECT_TRUE(absl::IsFailedPrecondition((*stream)->Next(&batch)));
}

// An OpenStream of a finite shm stream with a two-slot ring.
v1::StreamRequest ShmOpen(bool notice_socket, uint64_t epochs) {
  v1::StreamRequest open;
  v1::OpenStream* o = open.mutable_open();
  o->set_dataset("train");
  o->set_pipeline("train");
  o->set_batch_size(2);
  o->set_seed(3);
  o->set_epochs(epochs);
  o->set_prefetch(1);
  o->set_hold(1);
  o->set_transport(v1::TRANSPORT_SHM);
  o->set_notice_socket(notice_socket);
  return open;
}

// The protocol of the notice socket under the client: batches come on the
// socket, AckLists sent on it free the ring's slots (two of them, so the
// stream goes on only as acks are taken), and at the end the daemon shuts
// the socket down, then ends the call with OK. (A stream ends only once its
// client has fetched the ring, so this client maps it too.)
TEST_F(NoticeTest, NoticeSocketCarriesBatchesAndAcksToTheEnd) {
  RawCall call(server_->target(), ShmOpen(/*notice_socket=*/true, 1), 60);
  ASSERT_TRUE(call.ok());
  const v1::StreamHeader& header = call.header();
  ASSERT_TRUE(header.has_notices());
  ASSERT_EQ(header.shm().slots(), 2u);
  ASSERT_EQ(header.steps_per_epoch(), 25u);  // 50 samples, 2 a batch.
  auto ring = MapShmRing(header.shm());
  ASSERT_TRUE(ring.ok()) << ring.status();
  int verdict;
  const int fd = ConnectNotices(header.notices(), &verdict);
  ASSERT_GE(fd, 0) << "verdict " << verdict;

  auto ack_of = [](const v1::StreamResponse& r) {
    v1::Ack ack;
    ack.mutable_position()->set_epoch(r.batch().epoch());
    ack.mutable_position()->set_step(r.batch().step());
    ack.set_wait_seconds(0.25);
    ack.set_busy_seconds(1.0);
    return ack;
  };
  std::vector<uint64_t> steps;
  for (int round = 0; steps.size() < 25; ++round) {
    v1::StreamResponse first, second;
    ASSERT_TRUE(ReadBatch(fd, &first)) << "after step " << steps.size();
    steps.push_back(first.batch().step());
    EXPECT_LT(first.batch().slot(), 2u);
    if (steps.size() == 25) break;
    ASSERT_TRUE(ReadBatch(fd, &second)) << "after step " << steps.size();
    steps.push_back(second.batch().step());
    if (round == 3) {
      // Both slots are full, so the daemon took the six acks sent so far.
      v1::DaemonStats stats;
      ASSERT_TRUE(Client::Connect(server_->target())->GetStats(&stats).ok());
      ASSERT_EQ(stats.streams_size(), 1);
      EXPECT_EQ(stats.streams(0).acks(), 6u);
      EXPECT_DOUBLE_EQ(stats.streams(0).wait_seconds(), 6 * 0.25);
    }
    v1::StreamRequest acks;
    *acks.mutable_acks()->add_acks() = ack_of(first);
    *acks.mutable_acks()->add_acks() = ack_of(second);
    ASSERT_TRUE(WriteFrame(fd, acks));
  }
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], i);

  // The last batch is acked with a lone Ack, as older clients send (the
  // daemon may have shut the socket down already: that is no error).
  v1::StreamRequest last;
  last.mutable_ack()->mutable_position()->set_step(24);
  WriteFrame(fd, last);
  // Then the socket ends, and no batch ever came on the call.
  std::string more;
  EXPECT_FALSE(ReadFrame(fd, &more));
  close(fd);
  const grpc::Status status = call.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(NoticeTest, NoticeSocketTokenWorksOnce) {
  RawCall call(server_->target(), ShmOpen(/*notice_socket=*/true, 0), 30);
  ASSERT_TRUE(call.ok());
  ASSERT_TRUE(call.header().has_notices());
  v1::NoticeSocket wrong = call.header().notices();
  wrong.set_token(std::string(wrong.token().size(), 'x'));
  int verdict;
  EXPECT_LT(ConnectNotices(wrong, &verdict), 0);
  EXPECT_EQ(verdict, 0);
  const int fd = ConnectNotices(call.header().notices(), &verdict);
  ASSERT_GE(fd, 0) << "verdict " << verdict;
  EXPECT_LT(ConnectNotices(call.header().notices(), &verdict), 0);
  EXPECT_EQ(verdict, 0);
  v1::StreamResponse batch;
  EXPECT_TRUE(ReadBatch(fd, &batch));
  close(fd);
  call.Cancel();
}

// A client that closes the notice socket ends its stream: the daemon frees
// it and ends the call with CANCELLED.
TEST_F(NoticeTest, ClosingTheNoticeSocketEndsTheStream) {
  RawCall call(server_->target(), ShmOpen(/*notice_socket=*/true, 0), 30);
  ASSERT_TRUE(call.ok());
  ASSERT_TRUE(call.header().has_notices());
  int verdict;
  const int fd = ConnectNotices(call.header().notices(), &verdict);
  ASSERT_GE(fd, 0) << "verdict " << verdict;
  v1::StreamResponse batch;
  ASSERT_TRUE(ReadBatch(fd, &batch));
  service::StreamService* svc = server_->server()->stream_service();
  EXPECT_EQ(svc->GetStats().open_streams, 1u);
  close(fd);

  const grpc::Status status = call.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED)
      << status.error_message();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((svc->GetStats().open_streams != 0 ||
          svc->GetStats().bytes_reserved != 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(svc->GetStats().open_streams, 0u);
  EXPECT_EQ(svc->GetStats().bytes_reserved, 0u);
}

// ---- The client's framing, on a socketpair: the daemon's end by hand.

class NoticeSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    socket_ = std::make_unique<NoticeSocket>(fds[0], "/run/test/notices");
    peer_ = fds[1];
  }
  void TearDown() override {
    if (peer_ >= 0) close(peer_);
  }
  void ClosePeer() {
    close(peer_);
    peer_ = -1;
  }
  std::unique_ptr<NoticeSocket> socket_;
  int peer_ = -1;
};

v1::StreamResponse BatchAt(uint64_t step) {
  v1::StreamResponse r;
  r.mutable_batch()->set_step(step);
  r.mutable_batch()->set_slot(static_cast<uint32_t>(step % 3));
  return r;
}

TEST_F(NoticeSocketTest, ReadsEachOfSeveralFramesThatCameInOneWrite) {
  std::string bytes;
  for (uint64_t step = 0; step < 5; ++step) bytes += Frame(BatchAt(step));
  ASSERT_EQ(send(peer_, bytes.data(), bytes.size(), 0),
            static_cast<ssize_t>(bytes.size()));
  ClosePeer();
  for (uint64_t step = 0; step < 5; ++step) {
    v1::StreamResponse r;
    absl::StatusOr<bool> got = socket_->Read(&r);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(*got);
    EXPECT_EQ(r.batch().step(), step);
  }
  v1::StreamResponse r;
  absl::StatusOr<bool> got = socket_->Read(&r);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(*got);
  EXPECT_FALSE(socket_->truncated());
}

TEST_F(NoticeSocketTest, ReadsAFrameLargerThanOneReadBringsAcrossReads) {
  v1::StreamResponse big = BatchAt(7);
  for (uint64_t i = 0; i < 100000; ++i) big.mutable_batch()->add_sample_ids(i);
  const std::string bytes = Frame(big) + Frame(BatchAt(8));
  ASSERT_GT(bytes.size(), size_t{200} << 10);
  // More than the socket buffer holds: written while the client reads.
  std::thread writer([&] {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(peer_, bytes.data() + sent,
                             std::min<size_t>(bytes.size() - sent, 5000), 0);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  });
  v1::StreamResponse r;
  absl::StatusOr<bool> got = socket_->Read(&r);
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(*got);
  EXPECT_EQ(r.batch().step(), 7u);
  EXPECT_EQ(r.batch().sample_ids_size(), 100000);
  got = socket_->Read(&r);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(r.batch().step(), 8u);
}

TEST_F(NoticeSocketTest, EndInsideAFrameIsTheEndAndSaysSo) {
  const std::string frame = Frame(BatchAt(1));
  ASSERT_EQ(send(peer_, frame.data(), frame.size() - 3, 0),
            static_cast<ssize_t>(frame.size() - 3));
  ClosePeer();
  v1::StreamResponse r;
  absl::StatusOr<bool> got = socket_->Read(&r);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(*got);
  EXPECT_TRUE(socket_->truncated());
}

TEST_F(NoticeSocketTest, FrameOverOneMebibyteIsDataLossNamingTheSocket) {
  const unsigned char length[4] = {0x01, 0x00, 0x10, 0x00};  // 1 MiB + 1.
  ASSERT_EQ(send(peer_, length, 4, 0), 4);
  v1::StreamResponse r;
  absl::StatusOr<bool> got = socket_->Read(&r);
  ASSERT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("/run/test/notices"));
}

TEST_F(NoticeSocketTest, FrameThatDoesNotParseIsDataLoss) {
  // Field 2 (batch) as a length-delimited field longer than the frame.
  const std::string frame("\x03\x00\x00\x00\x12\x7f\x00", 7);
  ASSERT_EQ(send(peer_, frame.data(), frame.size(), 0), 7);
  v1::StreamResponse r;
  absl::StatusOr<bool> got = socket_->Read(&r);
  ASSERT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("/run/test/notices"));
}

TEST_F(NoticeSocketTest, ShutdownEndsABlockedRead) {
  absl::StatusOr<bool> got = true;
  std::thread reader([&] {
    v1::StreamResponse r;
    got = socket_->Read(&r);
  });
  socket_->Shutdown();
  reader.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(*got);
}

// Acks written from several threads at once arrive as whole frames, each
// one intact, even when a frame takes more than one send().
TEST_F(NoticeSocketTest, ConcurrentWritesNeverInterleave) {
  constexpr int kThreads = 4;
  constexpr int kFrames = 20;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kFrames; ++i) {
        v1::StreamRequest request;
        // Large enough (about 80 KB) that a send() may take part of it.
        for (int a = 0; a < 4000; ++a) {
          v1::Ack* ack = request.mutable_acks()->add_acks();
          ack->mutable_position()->set_epoch(t);
          ack->mutable_position()->set_step(i);
        }
        socket_->Write(request);
      }
    });
  }
  std::vector<int> next(kThreads, 0);
  for (int n = 0; n < kThreads * kFrames; ++n) {
    std::string bytes;
    ASSERT_TRUE(ReadFrame(peer_, &bytes));
    v1::StreamRequest request;
    ASSERT_TRUE(request.ParseFromString(bytes));
    ASSERT_EQ(request.acks().acks_size(), 4000);
    const uint64_t t = request.acks().acks(0).position().epoch();
    ASSERT_LT(t, static_cast<uint64_t>(kThreads));
    EXPECT_EQ(request.acks().acks(3999).position().epoch(), t);
    EXPECT_EQ(request.acks().acks(0).position().step(),
              static_cast<uint64_t>(next[t]++));
  }
  for (auto& w : writers) w.join();
}

TEST_F(NoticeSocketTest, WriteToAClosedPeerIsQuiet) {
  ClosePeer();
  v1::StreamRequest request;
  request.mutable_ack()->mutable_position()->set_step(1);
  socket_->Write(request);  // No SIGPIPE, no error: the read side shows it.
  socket_->Write(request);
  v1::StreamResponse r;
  absl::StatusOr<bool> got = socket_->Read(&r);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(*got);
}

}  // namespace
}  // namespace stoker
