#include "server/dataset/map_guard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

constexpr size_t kMapBytes = 4 * 4096;

// A file of kMapBytes mapped read-only and shared, as LMDB maps a shard.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(::ftruncate(fd_, kMapBytes), 0);
    map_ = static_cast<const char*>(
        ::mmap(nullptr, kMapBytes, PROT_READ, MAP_SHARED, fd_, 0));
    EXPECT_NE(map_, MAP_FAILED);
  }
  ~MappedFile() {
    ::munmap(const_cast<char*>(map_), kMapBytes);
    ::close(fd_);
  }
  // Cuts the file to one page: reads past it raise SIGBUS.
  void Truncate() { ASSERT_EQ(::ftruncate(fd_, 4096), 0); }
  const char* map() const { return map_; }

 private:
  int fd_ = -1;
  const char* map_ = nullptr;
};

struct Read {
  const char* at;
  volatile char value;
};

void ReadByte(void* arg) {
  Read& r = *static_cast<Read*>(arg);
  r.value = *reinterpret_cast<const volatile char*>(r.at);
}

// Reads the byte at `at` outside any guard, then exits 0.
void ReadUnguardedAndExit(const char* at) {
  Read r{at, 1};
  ReadByte(&r);
  std::_Exit(0);
}

// Reads the byte at `at` inside a guard, then exits 0 (whatever it returned).
void ReadGuardedAndExit(const char* at) {
  Read r{at, 1};
  MapFault fault;
  RunGuarded(ReadByte, &r, &fault);
  std::_Exit(0);
}

TEST(MapGuardTest, RunsTheFunctionToItsEndWhenNothingFaults) {
  testing::ScopedTempDir tmp;
  MappedFile file(tmp.path() + "/shard");
  auto region = MappedRegion::Register(file.map(), kMapBytes);
  ASSERT_TRUE(region.ok()) << region.status();
  Read r{file.map() + 3 * 4096, 1};
  MapFault fault;
  EXPECT_TRUE(RunGuarded(ReadByte, &r, &fault));
  EXPECT_EQ(r.value, 0);
}

TEST(MapGuardTest, TurnsSigbusInARegisteredMapIntoAFault) {
  testing::ScopedTempDir tmp;
  MappedFile file(tmp.path() + "/shard");
  auto region = MappedRegion::Register(file.map(), kMapBytes);
  ASSERT_TRUE(region.ok()) << region.status();
  file.Truncate();
  // Twice: the guard must work again on the same thread after a jump.
  for (int i = 0; i < 2; ++i) {
    Read r{file.map() + 2 * 4096 + 17, 1};
    MapFault fault;
    ASSERT_FALSE(RunGuarded(ReadByte, &r, &fault));
    EXPECT_EQ(fault.signal, SIGBUS);
    EXPECT_STREQ(FaultSignalName(fault.signal), "SIGBUS");
    EXPECT_EQ(fault.address, reinterpret_cast<uintptr_t>(r.at));
    EXPECT_EQ(fault.base, file.map());
  }
  // The first page is still there.
  Read r{file.map() + 5, 1};
  MapFault fault;
  EXPECT_TRUE(RunGuarded(ReadByte, &r, &fault));
}

// The guard must not swallow real bugs: these still kill the process. Under
// ASan the chained handler is ASan's, which reports the fault and exits 1,
// or aborts with ASAN_OPTIONS=abort_on_error=1 (as tests/run.sh sets it),
// instead of dying by the signal; the death tests then check only that the
// process does not end normally.
#if defined(__SANITIZE_ADDRESS__)
bool DidNotSurvive(int status) {
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#define STOKER_KILLED_BY(sig) DidNotSurvive
#else
#define STOKER_KILLED_BY(sig) ::testing::KilledBySignal(sig)
#endif

TEST(MapGuardDeathTest, AFaultOutsideAGuardStillKillsTheProcess) {
  testing::ScopedTempDir tmp;
  MappedFile file(tmp.path() + "/shard");
  auto region = MappedRegion::Register(file.map(), kMapBytes);
  ASSERT_TRUE(region.ok()) << region.status();
  file.Truncate();
  EXPECT_EXIT(ReadUnguardedAndExit(file.map() + 2 * 4096),
              STOKER_KILLED_BY(SIGBUS), "");
}

TEST(MapGuardDeathTest, AGuardedFaultOutsideEveryRegionStillKillsTheProcess) {
  testing::ScopedTempDir tmp;
  MappedFile file(tmp.path() + "/shard");
  MappedFile other(tmp.path() + "/other");
  auto region = MappedRegion::Register(file.map(), kMapBytes);
  ASSERT_TRUE(region.ok()) << region.status();
  other.Truncate();  // Not registered.
  EXPECT_EXIT(ReadGuardedAndExit(other.map() + 2 * 4096),
              STOKER_KILLED_BY(SIGBUS), "");
  EXPECT_EXIT(ReadGuardedAndExit(nullptr), STOKER_KILLED_BY(SIGSEGV), "");
}

TEST(MapGuardDeathTest, AnUnregisteredRegionIsNoLongerRecovered) {
  testing::ScopedTempDir tmp;
  MappedFile file(tmp.path() + "/shard");
  {
    auto region = MappedRegion::Register(file.map(), kMapBytes);
    ASSERT_TRUE(region.ok()) << region.status();
  }
  file.Truncate();
  EXPECT_EXIT(ReadGuardedAndExit(file.map() + 2 * 4096),
              STOKER_KILLED_BY(SIGBUS), "");
}

}  // namespace
}  // namespace stoker::dataset
