// ShmRing's slots: taken and released, and mapped in one call the first
// time each is taken.
#include "server/transport/shm/shm_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace stoker::transport {
namespace {

// How many of the pages of [data, data + bytes) are resident.
size_t ResidentPages(const uint8_t* data, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core(bytes / page);
  EXPECT_EQ(mincore(const_cast<uint8_t*>(data), bytes, in_core.data()), 0);
  size_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident;
}

// Whether this kernel maps pages on MADV_POPULATE_WRITE (Linux 5.14).
bool KernelPopulates() {
#ifdef MADV_POPULATE_WRITE
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const bool ok = madvise(p, page, MADV_POPULATE_WRITE) == 0;
  munmap(p, page);
  return ok;
#else
  return false;
#endif
}

TEST(ShmRingTest, ASlotsPagesAreMappedBeforeItsFirstWriteNotWhenTaken) {
  if (!KernelPopulates()) GTEST_SKIP() << "no MADV_POPULATE_WRITE here";
  constexpr size_t kBytes = 1 << 20;
  auto ring = ShmRing::Create("test-populate", 2, kBytes, nullptr);
  ASSERT_TRUE(ring.ok()) << ring.status();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = (*ring)->slot_bytes();

  // A slot taken and never written (a shared run lends its batch instead)
  // costs no memory.
  std::unique_ptr<service::BatchBuffer> first = (*ring)->Take();
  ASSERT_NE(first, nullptr);
  std::unique_ptr<service::BatchBuffer> second = (*ring)->Take();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(ResidentPages(first->data(), bytes), 0u);
  EXPECT_EQ(ResidentPages(second->data(), bytes), 0u);
  EXPECT_EQ((*ring)->Take(), nullptr);  // Both slots in use.

  second->BeforeWrite();
  EXPECT_EQ(ResidentPages(second->data(), bytes), bytes / page);
  EXPECT_EQ(ResidentPages(first->data(), bytes), 0u);
}

TEST(ShmRingTest, TheSlotReleasedLastIsTakenFirst) {
  // A consumer that takes each batch as it is built cycles through a few
  // slots; the others stay unwritten.
  auto ring = ShmRing::Create("test-lifo", 4, 1000, nullptr);
  ASSERT_TRUE(ring.ok()) << ring.status();
  std::vector<std::unique_ptr<service::BatchBuffer>> taken;
  for (int i = 0; i < 3; ++i) taken.push_back((*ring)->Take());
  (*ring)->Release(0);
  (*ring)->Release(2);
  std::unique_ptr<service::BatchBuffer> next = (*ring)->Take();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->home().index, 2u);
  next = (*ring)->Take();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->home().index, 0u);
}

TEST(ShmRingTest, AReleasedSlotIsTakenAgain) {
  auto ring = ShmRing::Create("test-release", 2, 1000, nullptr);
  ASSERT_TRUE(ring.ok()) << ring.status();
  std::unique_ptr<service::BatchBuffer> a = (*ring)->Take();
  std::unique_ptr<service::BatchBuffer> b = (*ring)->Take();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ((*ring)->free_slots(), 0u);
  uint8_t* const a_data = a->data();
  a.reset();  // Dropping the buffer does not free the slot ...
  EXPECT_EQ((*ring)->Take(), nullptr);
  (*ring)->Release(0);  // ... its release does (slot 0 was taken first).
  (*ring)->Release(0);  // Twice does nothing more.
  EXPECT_EQ((*ring)->free_slots(), 1u);
  std::unique_ptr<service::BatchBuffer> again = (*ring)->Take();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->data(), a_data);
}

}  // namespace
}  // namespace stoker::transport
