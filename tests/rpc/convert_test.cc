// A handover as gRPC sends it: the prefix plus the payload slice are byte
// for byte the serialized StreamResponse, and the payload's buffer goes back
// only once gRPC lets go of the message.
#include "server/rpc/convert.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::rpc {
namespace {

// A buffer that says when it is dropped.
class WatchedBuffer : public service::BatchBuffer {
 public:
  WatchedBuffer(size_t bytes, bool* dropped)
      : data_(bytes, 0), dropped_(dropped) {}
  ~WatchedBuffer() override { *dropped_ = true; }
  uint8_t* data() override { return data_.data(); }
  size_t capacity() const override { return data_.size(); }

 private:
  std::vector<uint8_t> data_;
  bool* const dropped_;
};

std::string Flatten(const grpc::ByteBuffer& wire) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(wire.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

TEST(EncodeTest, APayloadTravelsAsTheBatchPayloadWithoutACopy) {
  bool dropped = false;
  auto buffer = std::make_unique<WatchedBuffer>(4096, &dropped);
  for (size_t i = 0; i < 300; ++i) buffer->data()[i] = static_cast<uint8_t>(i);
  const uint8_t* bytes = buffer->data();
  transport::Handover handover;
  v1::Batch* batch = handover.message.mutable_batch();
  batch->set_epoch(3);
  batch->set_step(7);
  batch->add_sample_ids(11);
  batch->add_sample_ids(12);
  handover.payload = std::move(buffer);
  handover.payload_bytes = 300;  // Of a larger buffer.

  auto wire = std::make_unique<grpc::ByteBuffer>(Encode(std::move(handover)));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire->Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].begin(), bytes) << "the payload slice is the buffer";
  v1::StreamResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(*wire)));
  EXPECT_EQ(parsed.batch().epoch(), 3u);
  EXPECT_EQ(parsed.batch().step(), 7u);
  EXPECT_EQ(parsed.batch().sample_ids_size(), 2);
  ASSERT_EQ(parsed.batch().payload().size(), 300u);
  EXPECT_EQ(static_cast<uint8_t>(parsed.batch().payload()[299]), 299 % 256);

  slices.clear();
  EXPECT_FALSE(dropped);
  wire.reset();
  EXPECT_TRUE(dropped);
}

TEST(EncodeTest, WithoutAPayloadItIsTheMessage) {
  transport::Handover handover;
  handover.message.mutable_batch()->set_slot(5);
  v1::StreamResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(Encode(std::move(handover)))));
  EXPECT_EQ(parsed.batch().slot(), 5u);
  EXPECT_TRUE(parsed.batch().payload().empty());
}

}  // namespace
}  // namespace stoker::rpc
