// A cuda_ipc ring's device memory on a GPU, in every sharing kind the GPU
// offers: the daemon's side (DeviceRingMemory) allocates and fills it, and
// another process maps it with the client's code (DeviceMapping), from the
// exported descriptor or the legacy handle, reads what the daemon wrote
// and writes back; the allocation is freed with its owner. Skips, saying
// why, where this process sees no GPU.
//
// The other process is this binary again, started as this one was (main
// below), told what to map by its environment, with the descriptor as fd 3.
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/lib/cuda_ipc/device_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cuda/cuda_probe.h"
#include "server/transport/cuda_ipc/device_ring_memory.h"

extern char** environ;

namespace stoker::transport {
namespace {

constexpr size_t kAsked = 3 * 1000 * 1000 + 7;
constexpr size_t kWritten = 4096;  // What the other process writes back.

uint8_t Pattern(size_t i) { return static_cast<uint8_t>(i * 131 + 7); }
uint8_t Answer(size_t i) { return static_cast<uint8_t>(i * 29 + 1); }

// The other process: maps the ring, checks the daemon's bytes, writes its
// answer. Returns its exit code.
int MapInChild() {
  const char* kind = std::getenv("STOKER_RING_KIND");
  const char* bytes = std::getenv("STOKER_RING_BYTES");
  const char* uuid = std::getenv("STOKER_RING_GPU");
  v1::CudaIpcRing ring;
  uint64_t ring_bytes = 0;
  if (kind == nullptr || bytes == nullptr || uuid == nullptr ||
      !absl::SimpleAtoi(bytes, &ring_bytes)) {
    std::fprintf(stderr, "child: STOKER_RING_* not set\n");
    return 2;
  }
  ring.set_ring_bytes(ring_bytes);
  ring.set_gpu_uuid(uuid);
  int fd = -1;
  if (std::string(kind) == "legacy_ipc") {
    ring.set_handle_kind(v1::CUDA_HANDLE_LEGACY_IPC);
    ring.set_legacy_handle(
        absl::HexStringToBytes(std::getenv("STOKER_RING_HANDLE")));
  } else {
    ring.set_handle_kind(v1::CUDA_HANDLE_VMM_POSIX_FD);
    fd = 3;
  }
  auto device = FindGpuByUuid(uuid);
  if (!device.ok()) {
    std::fprintf(stderr, "child: %s\n", device.status().ToString().c_str());
    return 3;
  }
  auto mapping = DeviceMapping::Map(ring, fd, *device);
  if (!mapping.ok()) {
    std::fprintf(stderr, "child: %s\n", mapping.status().ToString().c_str());
    return 4;
  }
  std::vector<uint8_t> seen(kAsked);
  if (cudaMemcpy(seen.data(), (*mapping)->base(), kAsked,
                 cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "child: cudaMemcpy from the mapping failed\n");
    return 5;
  }
  for (size_t i = 0; i < kAsked; ++i) {
    if (seen[i] != Pattern(i)) {
      std::fprintf(stderr, "child: byte %zu is %d, the daemon wrote %d\n", i,
                   seen[i], Pattern(i));
      return 6;
    }
  }
  std::vector<uint8_t> answer(kWritten);
  for (size_t i = 0; i < kWritten; ++i) answer[i] = Answer(i);
  if (cudaMemcpy((*mapping)->base(), answer.data(), kWritten,
                 cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "child: writing through the mapping failed\n");
    return 7;
  }
  return 0;
}

// Runs MapInChild in a new process of this binary; its exit code.
int SpawnChild(const DeviceRingMemory& memory, const std::string& gpu) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("STOKER_RING_CHILD=1");
  env.push_back(absl::StrCat("STOKER_RING_KIND=",
                             std::string(HandleKindName(memory.kind()))));
  env.push_back(absl::StrCat("STOKER_RING_BYTES=", memory.bytes()));
  env.push_back(absl::StrCat("STOKER_RING_GPU=", gpu));
  env.push_back(absl::StrCat("STOKER_RING_HANDLE=",
                             absl::BytesToHexString(memory.legacy_handle())));
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (memory.fd() >= 0)
    posix_spawn_file_actions_adddup2(&actions, memory.fd(), 3);
  // This process's own command line: run through the bundle's loader
  // (tests/gpu/run.sh), /proc/self/exe is the loader, which needs its
  // arguments again.
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(cmdline, arg, '\0');) {
    args.push_back(arg);
  }
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr,
                                  argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(DeviceRingMemoryGpuTest, AnotherProcessMapsTheRingInEveryKind) {
  const cuda::CudaProbe& probe = cuda::ProbeCuda();
  if (probe.gpus.empty()) {
    GTEST_SKIP() << "needs a GPU: " << cuda::DescribeCuda(probe);
  }
  auto support = QuerySharingSupport(0);
  ASSERT_TRUE(support.ok()) << support.status();
  std::cout << "GPU 0 " << probe.gpus[0].uuid << ": vmm " << support->vmm
            << ", posix_fd " << support->posix_fd << "\n";
  const SharingPlan plan = PlanSharing(*support);
  for (HandleKind kind : plan.order) {
    SCOPED_TRACE(std::string(HandleKindName(kind)));
    size_t free_before = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    auto memory = DeviceRingMemory::Create(0, kAsked, kind);
    ASSERT_TRUE(memory.ok()) << memory.status();
    EXPECT_GE((*memory)->bytes(), kAsked);
    if (kind == HandleKind::kVmmPosixFd) {
      struct stat st;
      ASSERT_GE((*memory)->fd(), 0);
      EXPECT_EQ(fstat((*memory)->fd(), &st), 0);
      EXPECT_TRUE((*memory)->legacy_handle().empty());
    } else {
      EXPECT_EQ((*memory)->fd(), -1);
      EXPECT_EQ((*memory)->legacy_handle().size(), 64u);
    }
    std::vector<uint8_t> pattern(kAsked);
    for (size_t i = 0; i < kAsked; ++i) pattern[i] = Pattern(i);
    ASSERT_EQ(cudaMemcpy((*memory)->data(), pattern.data(), kAsked,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    EXPECT_EQ(SpawnChild(**memory, probe.gpus[0].uuid), 0)
        << "the other process could not map or read the ring (its stderr "
           "says why)";
    std::vector<uint8_t> answer(kWritten);
    ASSERT_EQ(cudaMemcpy(answer.data(), (*memory)->data(), kWritten,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (size_t i = 0; i < kWritten; ++i) {
      ASSERT_EQ(answer[i], Answer(i)) << "byte " << i;
    }
    memory->reset();
    size_t free_after = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
    // Freed with its owner, once the other process has unmapped it (it has
    // exited).
    EXPECT_GE(free_after + (2 << 20), free_before);
  }
}

}  // namespace
}  // namespace stoker::transport

int main(int argc, char** argv) {
  if (std::getenv("STOKER_RING_CHILD") != nullptr) {
    return stoker::transport::MapInChild();
  }
  ::testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}
