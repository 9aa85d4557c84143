#include "server/transport/shm/notice_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::transport {
namespace {

// The client's end: connects with a token and reads the answer byte.
class Peer {
 public:
  Peer(const std::string& path, const std::string& token) {
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        send(fd_, token.data(), token.size(), 0) !=
            static_cast<ssize_t>(token.size()) ||
        recv(fd_, &answer_, 1, MSG_WAITALL) != 1) {
      answer_ = -1;
    }
  }
  ~Peer() { close(fd_); }
  int answer() const { return answer_; }
  int fd() const { return fd_; }

  void Write(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  void WriteFrame(const google::protobuf::MessageLite& m) {
    const std::string body = m.SerializeAsString();
    std::string frame(4, '\0');
    for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(body.size() >> (8 * i));
    Write(frame + body);
  }
  // The next frame's message; false at the end of the connection.
  bool ReadFrame(v1::StreamResponse* out) {
    unsigned char length[4];
    if (recv(fd_, length, 4, MSG_WAITALL) != 4) return false;
    const size_t n = length[0] | length[1] << 8 | length[2] << 16 |
                     size_t{length[3]} << 24;
    std::string body(n, '\0');
    if (n > 0 && recv(fd_, body.data(), n, MSG_WAITALL) !=
                     static_cast<ssize_t>(n)) {
      return false;
    }
    return out->ParseFromString(body);
  }

 private:
  int fd_ = -1;
  char answer_ = -1;
};

v1::StreamResponse BatchAt(uint64_t step, size_t ids = 0) {
  v1::StreamResponse r;
  r.mutable_batch()->set_step(step);
  for (size_t i = 0; i < ids; ++i) r.mutable_batch()->add_sample_ids(i);
  return r;
}

class NoticeChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FdServer>(dir_.path() + "/s.shm", 0660, -1);
    ASSERT_TRUE(server_->Start().ok());
    NoticeChannel::Hooks hooks;
    hooks.connected = [this] {
      absl::MutexLock lock(&mu_);
      ++connected_;
    };
    hooks.request = [this](const v1::StreamRequest& r) {
      absl::MutexLock lock(&mu_);
      requests_.push_back(r);
    };
    hooks.lost = [this](const absl::Status& s) {
      absl::MutexLock lock(&mu_);
      lost_.push_back(s);
    };
    channel_ = NoticeChannel::Create(server_.get(), std::move(hooks));
  }
  void TearDown() override { channel_->Detach(); }

  // Waits (up to 10 s) until `done` holds under the hooks' lock.
  bool Await(std::function<bool()> done) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10));
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<FdServer> server_;
  std::shared_ptr<NoticeChannel> channel_;
  absl::Mutex mu_;
  int connected_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::StreamRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> lost_ ABSL_GUARDED_BY(mu_);
};

TEST_F(NoticeChannelTest, FramesGoBothWaysAndTheEndFollowsTheLastOne) {
  channel_->Send(BatchAt(0));  // Before the client connects: not sent.
  Peer peer(server_->path(), channel_->token());
  ASSERT_EQ(peer.answer(), 1);
  ASSERT_TRUE(Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return connected_ == 1;
  }));
  EXPECT_TRUE(channel_->connected());
  channel_->Send(BatchAt(1));
  channel_->Send(BatchAt(2));
  v1::StreamRequest ack;
  ack.mutable_acks()->add_acks()->mutable_position()->set_step(1);
  ack.mutable_acks()->add_acks()->mutable_position()->set_step(2);
  peer.WriteFrame(ack);
  ASSERT_TRUE(Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return requests_.size() == 1;
  }));
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(requests_[0].acks().acks_size(), 2);
    EXPECT_EQ(requests_[0].acks().acks(1).position().step(), 2u);
  }
  channel_->End();
  channel_->Send(BatchAt(3));  // After the end: not sent.
  v1::StreamResponse r;
  ASSERT_TRUE(peer.ReadFrame(&r));
  EXPECT_EQ(r.batch().step(), 1u);
  ASSERT_TRUE(peer.ReadFrame(&r));
  EXPECT_EQ(r.batch().step(), 2u);
  EXPECT_FALSE(peer.ReadFrame(&r)) << "the connection ends after the last";
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(lost_.empty()) << "an end the stream asked for is no loss";
}

TEST_F(NoticeChannelTest, WhatTheSocketCannotTakeAtOnceFollowsInOrder) {
  Peer peer(server_->path(), channel_->token());
  ASSERT_EQ(peer.answer(), 1);
  ASSERT_TRUE(Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return connected_ == 1;
  }));
  // About 8 MB while the client reads nothing: far more than a socket's
  // buffer, so most of it waits for the channel's thread.
  constexpr int kFrames = 4000;
  for (int i = 0; i < kFrames; ++i) channel_->Send(BatchAt(i, 1000));
  channel_->End();
  v1::StreamResponse r;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_TRUE(peer.ReadFrame(&r)) << "frame " << i;
    ASSERT_EQ(r.batch().step(), static_cast<uint64_t>(i));
    ASSERT_EQ(r.batch().sample_ids_size(), 1000);
  }
  EXPECT_FALSE(peer.ReadFrame(&r));
}

TEST_F(NoticeChannelTest, AClientThatClosesIsLost) {
  {
    Peer peer(server_->path(), channel_->token());
    ASSERT_EQ(peer.answer(), 1);
  }
  ASSERT_TRUE(Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return lost_.size() == 1;
  }));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(absl::IsCancelled(lost_[0])) << lost_[0];
}

TEST_F(NoticeChannelTest, AnOversizedFrameBreaksTheProtocol) {
  Peer peer(server_->path(), channel_->token());
  ASSERT_EQ(peer.answer(), 1);
  peer.Write(std::string("\xff\xff\xff\x7f", 4));
  ASSERT_TRUE(Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return lost_.size() == 1;
  }));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(absl::IsInvalidArgument(lost_[0])) << lost_[0];
  EXPECT_NE(lost_[0].message().find("at most"), std::string::npos);
}

TEST_F(NoticeChannelTest, AFrameThatIsNotARequestBreaksTheProtocol) {
  Peer peer(server_->path(), channel_->token());
  ASSERT_EQ(peer.answer(), 1);
  peer.Write(std::string("\x03\x00\x00\x00\xff\xff\xff", 7));
  ASSERT_TRUE(Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return lost_.size() == 1;
  }));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(absl::IsInvalidArgument(lost_[0])) << lost_[0];
}

TEST_F(NoticeChannelTest, AClientThatComesAfterTheEndFindsItEnded) {
  channel_->End();
  Peer peer(server_->path(), channel_->token());
  ASSERT_EQ(peer.answer(), 1);
  v1::StreamResponse r;
  EXPECT_FALSE(peer.ReadFrame(&r));
}

TEST_F(NoticeChannelTest, ATokenWorksOnceAndNotAfterDetach) {
  const std::string token = channel_->token();
  {
    Peer peer(server_->path(), token);
    ASSERT_EQ(peer.answer(), 1);
    Peer again(server_->path(), token);
    EXPECT_EQ(again.answer(), 0);
  }
  channel_->Detach();
  Peer late(server_->path(), token);
  EXPECT_EQ(late.answer(), 0);
}

}  // namespace
}  // namespace stoker::transport
