// ShmDelivery with batches a shared run lends: a client that maps the run's
// ring reads them in place, and the run's buffer stays pinned until the
// ack; any other client gets a copy in the stream's own ring.
#include "server/transport/shm/shm_transport.h"

#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/dataset_fixture.h"
#include "gtest/gtest.h"

namespace stoker::transport {
namespace {

constexpr size_t kBytes = 1000;

// What the client reads: the message, which on shm carries no payload.
v1::Batch Decode(Handover handover) {
  EXPECT_EQ(handover.payload, nullptr);
  return handover.message.batch();
}

class ShmDeliveryTest : public ::testing::Test {
protected:
  void SetUp() override {
    fd_server_ = std::make_unique<FdServer>(dir_.path() + "/s.shm", 0660, -1);
    ASSERT_TRUE(fd_server_->Start().ok());
    auto own = ShmRing::Create("test-own", 2, kBytes, nullptr);
    auto run = ShmRing::Create("test-run", 4, kBytes, nullptr);
    ASSERT_TRUE(own.ok() && run.ok());
    own_ = *own;
    run_ = *run;
  }

  // The batch at (0, 0) as a run lends it: built in `lender`, filled with
  // `fill`; *let_go turns true when no one holds the run's batch any more.
  service::ReadyBatch Lend(std::unique_ptr<service::BatchBuffer> lender,
                           uint8_t fill, bool *let_go) {
    std::memset(lender->data(), fill, kBytes);
    auto *run_batch = new service::ReadyBatch;
    run_batch->bytes = kBytes;
    run_batch->buffer = std::move(lender);
    auto built = std::shared_ptr<const service::ReadyBatch>(
        run_batch, [let_go](const service::ReadyBatch *b) {
          *let_go = true;
          delete b;
        });
    service::ReadyBatch ready;
    ready.bytes = kBytes;
    ready.buffer = std::make_unique<service::LentBatchBuffer>(std::move(built),
                                                              own_->Take());
    return ready;
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<FdServer> fd_server_;
  std::shared_ptr<ShmRing> own_;
  std::shared_ptr<ShmRing> run_;
};

TEST_F(ShmDeliveryTest, ALentBatchIsReadInTheRunsRingUntilItsAck) {
  ShmDelivery delivery(own_, fd_server_.get(), run_, nullptr);
  v1::StreamHeader header;
  delivery.DescribeIn(&header);
  ASSERT_TRUE(header.has_shared_ring());
  EXPECT_EQ(header.shared_ring().slots(), 4u);
  EXPECT_NE(header.shared_ring().token(), header.shm().token());

  std::unique_ptr<service::BatchBuffer> lender = run_->Take();
  const uint32_t run_slot = static_cast<ShmSlotBuffer *>(lender.get())->slot();
  bool let_go = false;
  v1::Batch batch =
      Decode(delivery.HandOver(Lend(std::move(lender), 7, &let_go)));
  EXPECT_TRUE(batch.in_shared_ring());
  EXPECT_EQ(batch.slot(), run_slot);
  // The stream's own slot stands for the batch in its window, and the
  // run's buffer is not reused, until the client acknowledges it.
  EXPECT_EQ(own_->free_slots(), 1u);
  EXPECT_FALSE(let_go);
  delivery.Acked(0, 0);
  EXPECT_EQ(own_->free_slots(), 2u);
  EXPECT_TRUE(let_go);
}

TEST_F(ShmDeliveryTest, AClientThatDoesNotMapTheRunsRingGetsACopy) {
  ShmDelivery delivery(own_, fd_server_.get(), nullptr, nullptr);
  v1::StreamHeader header;
  delivery.DescribeIn(&header);
  EXPECT_FALSE(header.has_shared_ring());

  bool let_go = false;
  v1::Batch batch = Decode(delivery.HandOver(Lend(run_->Take(), 9, &let_go)));
  EXPECT_FALSE(batch.in_shared_ring());
  EXPECT_TRUE(let_go) << "the run's buffer is free once copied";
  // The copy is in the stream's own slot, which is the client's until the ack.
  auto mapped = static_cast<const uint8_t *>(mmap(
      nullptr, 2 * own_->slot_bytes(), PROT_READ, MAP_SHARED, own_->fd(), 0));
  ASSERT_NE(mapped, MAP_FAILED);
  const uint8_t *slot = mapped + batch.slot() * own_->slot_bytes();
  EXPECT_EQ(std::vector<uint8_t>(slot, slot + kBytes),
            std::vector<uint8_t>(kBytes, 9));
  munmap(const_cast<uint8_t *>(mapped), 2 * own_->slot_bytes());
  EXPECT_EQ(own_->free_slots(), 1u);
  delivery.Acked(0, 0);
  EXPECT_EQ(own_->free_slots(), 2u);
}

TEST_F(ShmDeliveryTest, ABatchLentFromHeapMemoryIsCopied) {
  // A run whose buffers are not the ring the client mapped (heap memory).
  ShmDelivery delivery(own_, fd_server_.get(), run_, nullptr);
  bool let_go = false;
  v1::Batch batch = Decode(delivery.HandOver(
      Lend(std::make_unique<service::HeapBatchBuffer>(kBytes), 3, &let_go)));
  EXPECT_FALSE(batch.in_shared_ring());
  EXPECT_TRUE(let_go);
}

} // namespace
} // namespace stoker::transport
