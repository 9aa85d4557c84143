// The client's received messages are recycled: a released batch's message
// goes back to its pool however it is let go of, and parsing the next
// message into it reuses its payload's memory.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "client/lib/stream_call.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

// A serialized batch message with `payload_bytes` of payload at `epoch`.
grpc::ByteBuffer BatchMessage(size_t payload_bytes, uint64_t epoch) {
  v1::StreamResponse message;
  message.mutable_batch()->set_epoch(epoch);
  message.mutable_batch()->add_sample_ids(epoch * 10);
  message.mutable_batch()->set_payload(std::string(payload_bytes, 'p'));
  const std::string wire = message.SerializeAsString();
  // Split in slices, as gRPC hands over what it read from the socket.
  grpc::Slice slices[3] = {grpc::Slice(wire.substr(0, 1000)),
                           grpc::Slice(wire.substr(1000, 70000)),
                           grpc::Slice(wire.substr(71000))};
  return grpc::ByteBuffer(slices, 3);
}

TEST(MessagePoolTest, AParsedMessageReusesTheLastOnesPayloadMemory) {
  v1::StreamResponse response;
  grpc::ByteBuffer first = BatchMessage(1 << 20, 1);
  ASSERT_TRUE(ParseStreamMessage(&first, &response));
  const char* const memory = response.batch().payload().data();
  // A smaller payload: a string made for it would hold about its size.
  grpc::ByteBuffer second = BatchMessage(80000, 2);
  ASSERT_TRUE(ParseStreamMessage(&second, &response));
  EXPECT_EQ(response.batch().payload().data(), memory);
  EXPECT_GE(response.batch().payload().capacity(), 1u << 20);
  // The rest is the new message's alone, not merged with the last one's.
  EXPECT_EQ(response.batch().epoch(), 2u);
  ASSERT_EQ(response.batch().sample_ids_size(), 1);
  EXPECT_EQ(response.batch().sample_ids(0), 20u);
  EXPECT_EQ(response.batch().payload(), std::string(80000, 'p'));
}

TEST(MessagePoolTest, AMessageOfAnyKindFollowsAnother) {
  v1::StreamResponse response;
  grpc::ByteBuffer batch = BatchMessage(100000, 1);
  ASSERT_TRUE(ParseStreamMessage(&batch, &response));
  v1::StreamResponse header;
  header.mutable_header()->set_num_samples(7);
  grpc::Slice slice(header.SerializeAsString());
  grpc::ByteBuffer header_buffer(&slice, 1);
  ASSERT_TRUE(ParseStreamMessage(&header_buffer, &response));
  EXPECT_FALSE(response.has_batch());
  EXPECT_EQ(response.header().num_samples(), 7u);
  grpc::Slice junk(std::string("\xff\xff\xff", 3));
  grpc::ByteBuffer junk_buffer(&junk, 1);
  EXPECT_FALSE(ParseStreamMessage(&junk_buffer, &response));
}

TEST(MessagePoolTest, AMessageLetGoOfReturnsToItsPool) {
  auto pool = std::make_shared<MessagePool>();
  const void* first = nullptr;
  {
    MessagePool::Ptr message = pool->Get();
    first = message.get();
    message->response.mutable_batch()->set_payload(std::string(5000, 'x'));
  }  // Dropped, as an error path drops it.
  MessagePool::Ptr again = pool->Get();
  EXPECT_EQ(static_cast<const void*>(again.get()), first);
  EXPECT_GE(again->response.batch().payload().capacity(), 5000u);
  EXPECT_EQ(again->pool, pool);
}

TEST(MessagePoolTest, AReleasedMessageQueuesItsAckOnce) {
  auto pool = std::make_shared<MessagePool>();
  auto queue = std::make_shared<ReleaseQueue>();
  queue->held = 1;
  {
    MessagePool::Ptr message = pool->Get();
    message->release = queue;
    message->ack.mutable_position()->set_step(4);
  }
  ASSERT_EQ(queue->acks.size(), 1u);
  EXPECT_EQ(queue->acks[0].position().step(), 4u);
  EXPECT_EQ(queue->held, 0u);
  // Its next user starts with no ack and no hold of its own.
  MessagePool::Ptr again = pool->Get();
  EXPECT_EQ(again->release, nullptr);
  EXPECT_EQ(again->keep, nullptr);
  again.reset();
  EXPECT_EQ(queue->acks.size(), 1u);
}

TEST(MessagePoolTest, KeepsABoundedNumberIdle) {
  auto pool = std::make_shared<MessagePool>();
  std::vector<MessagePool::Ptr> taken;
  for (int i = 0; i < 20; ++i) taken.push_back(pool->Get());
  std::set<const void*> before;
  for (const auto& m : taken) before.insert(m.get());
  taken.clear();  // 20 let go; the pool keeps some of them.
  size_t reused = 0;
  for (int i = 0; i < 20; ++i) {
    taken.push_back(pool->Get());
    reused += before.count(static_cast<const void*>(taken.back().get()));
  }
  EXPECT_GT(reused, 0u);
  EXPECT_LT(reused, 20u);
}

}  // namespace
}  // namespace stoker
