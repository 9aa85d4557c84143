// The cuda_ipc transport's parts that need no GPU: its refusals (each
// FAILED_PRECONDITION saying why), its counters, the per-GPU device memory
// budget, and the order in which the ring's sharing kinds are tried. The
// streams themselves run on a GPU (tests/gpu/run.sh).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/transport/cuda_ipc/cuda_ipc_transport.h"
#include "server/transport/cuda_ipc/device_budget.h"
#include "server/transport/cuda_ipc/ring_sharing.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::transport {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kGpu[] = "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6c";
constexpr char kOtherGpu[] = "GPU-00000000-1111-2222-3333-444444444444";

cuda::CudaProbe OneGpu() {
  cuda::CudaProbe probe;
  probe.built = true;
  probe.runtime_version = 13000;
  probe.driver_version = 13000;
  probe.gpus = {{0, kGpu, "NVIDIA H200", 150'000'000'000}};
  return probe;
}

absl::Status OpenOn(CudaIpcTransport& transport, const std::string& uuid) {
  v1::OpenStream open;
  open.set_transport(v1::TRANSPORT_CUDA_IPC);
  open.set_gpu_uuid(uuid);
  service::OpenedStream opened;
  return transport.Open(OpenContext{open, opened, {}}).status();
}

TEST(CudaIpcTransportTest, WithoutCudaBuiltEveryStreamIsRefusedSayingSo) {
  const cuda::CudaProbe probe;  // As a build without the toolkit answers.
  CudaIpcTransport transport(TransportEnv{}, probe);
  EXPECT_THAT(transport.Available(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("transport cuda_ipc"),
                             HasSubstr(cuda::kNotBuiltReason))));
}

TEST(CudaIpcTransportTest, WithoutADriverTheDriversErrorIsTheReason) {
  cuda::CudaProbe probe;
  probe.built = true;
  probe.runtime_version = 13000;
  probe.driver_error =
      "cudaGetDeviceCount failed with cudaErrorInsufficientDriver";
  CudaIpcTransport transport(TransportEnv{}, probe);
  EXPECT_THAT(
      transport.Available(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("sees no GPU"), HasSubstr(probe.driver_error))));
}

// A daemon with a unix socket, which cuda_ipc's descriptor socket sits
// beside (never started here).
TransportEnv WithUnixSocket() {
  TransportEnv env;
  env.unix_path = "/nonexistent/stoker.sock";
  return env;
}

TEST(CudaIpcTransportTest, WithoutAUnixSocketItIsRefusedSayingSo) {
  const cuda::CudaProbe probe = OneGpu();
  CudaIpcTransport transport(TransportEnv{}, probe);
  EXPECT_THAT(transport.Available(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("needs the daemon's unix socket")));
}

TEST(CudaIpcTransportTest, TheTrainersGpuMustBeNamedByAUuidThisDaemonSees) {
  const cuda::CudaProbe probe = OneGpu();
  CudaIpcTransport transport(WithUnixSocket(), probe);
  ASSERT_THAT(transport.Available(), IsOk());
  EXPECT_TRUE(transport.client_holds());
  EXPECT_TRUE(transport.formats_on_delivery());
  EXPECT_THAT(OpenOn(transport, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs gpu_uuid")));
  EXPECT_THAT(OpenOn(transport, "0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not of the form GPU-")));
  EXPECT_THAT(
      OpenOn(transport, kOtherGpu),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr(absl::StrCat("no GPU with UUID ", kOtherGpu)),
                     HasSubstr(absl::StrCat("sees: ", kGpu)))));
}

TEST(CudaIpcTransportTest, TheStreamMustBeOpenedWithItsFullBind) {
  // The reactor asks for the rendering (formats_on_delivery), and the
  // service then binds the pipeline in full too: without that, no open.
  const cuda::CudaProbe probe = OneGpu();
  CudaIpcTransport transport(WithUnixSocket(), probe);
  EXPECT_THAT(OpenOn(transport, kGpu),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("full bind")));
}

TEST(CudaIpcTransportTest, TheRegistryFindsItAndItAnswersAsThisBuildCan) {
  Transports transports(WithUnixSocket());
  EXPECT_EQ(Transports::Name(v1::TRANSPORT_CUDA_IPC), "cuda_ipc");
  auto found = transports.Find(v1::TRANSPORT_CUDA_IPC);
  const cuda::CudaProbe& probe = cuda::ProbeCuda();
  if (!probe.built) {
    EXPECT_THAT(found.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr(cuda::kNotBuiltReason)));
  } else if (probe.gpus.empty()) {
    EXPECT_THAT(found.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr(probe.driver_error)));
  } else {
    EXPECT_THAT(found.status(), IsOk());
  }
}

TEST(CudaIpcTransportTest, ItsCountersStartAtZeroAndNameNoGpuBeforeAStream) {
  const cuda::CudaProbe probe = OneGpu();
  CudaIpcTransport transport(WithUnixSocket(), probe);
  std::vector<std::string> names;
  for (const service::NamedCount& c : transport.Counters()) {
    names.push_back(c.metric);
    EXPECT_EQ(c.value, 0) << c.metric;
    EXPECT_TRUE(c.labels.empty()) << c.metric;
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf(
                         {"stoker_cuda_socket_refused_total",
                          "stoker_cuda_socket_timed_out_total"}));
}

TEST(DeviceBudgetTest, ReservesPerGpuAndGivesBackWithTheReservation) {
  auto budget = DeviceBudget::Create(1000);
  auto a = budget->Reserve(kGpu, 600, "a ring");
  ASSERT_THAT(a, IsOk());
  // Another GPU has a budget of its own.
  auto b = budget->Reserve(kOtherGpu, 1000, "a ring");
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(budget->InUse(),
              ElementsAre(Pair(kOtherGpu, 1000), Pair(kGpu, 600)));
  EXPECT_THAT(
      budget->Reserve(kGpu, 401, "ring of 4 slots").status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("device_memory_budget 1000 bytes on GPU "),
                     HasSubstr(kGpu), HasSubstr("has 600 bytes in use"),
                     HasSubstr("ring of 4 slots asks for 401 bytes"))));
  auto c = budget->Reserve(kGpu, 400, "a ring");
  ASSERT_THAT(c, IsOk());
  a->reset();
  c->reset();
  EXPECT_THAT(budget->InUse(),
              ElementsAre(Pair(kOtherGpu, 1000), Pair(kGpu, 0)));
  EXPECT_THAT(budget->Reserve(kGpu, 1000, "a ring"), IsOk());
}

TEST(DeviceBudgetTest, AReservationKeepsItsBudgetAlive) {
  auto budget = DeviceBudget::Create(10);
  auto held = budget->Reserve(kGpu, 10, "a ring");
  ASSERT_THAT(held, IsOk());
  std::weak_ptr<DeviceBudget> weak = budget;
  budget.reset();
  EXPECT_FALSE(weak.expired());
  held->reset();
  EXPECT_TRUE(weak.expired());
}

TEST(RingSharingTest, VmmDescriptorsComeFirstThenLegacyHandles) {
  const SharingPlan plan = PlanSharing({/*vmm=*/true, /*posix_fd=*/true});
  EXPECT_THAT(plan.order,
              ElementsAre(HandleKind::kVmmPosixFd, HandleKind::kLegacyIpc));
  EXPECT_TRUE(plan.left_out.empty());
  std::vector<HandleKind> tried;
  auto choice = ChooseSharing({true, true}, kGpu, [&](HandleKind kind) {
    tried.push_back(kind);
    return absl::OkStatus();
  });
  ASSERT_THAT(choice, IsOk());
  EXPECT_EQ(choice->kind, HandleKind::kVmmPosixFd);
  EXPECT_THAT(tried, ElementsAre(HandleKind::kVmmPosixFd));
  EXPECT_EQ(ToProto(choice->kind), v1::CUDA_HANDLE_VMM_POSIX_FD);
}

TEST(RingSharingTest, AGpuWithoutVmmOrDescriptorsIsNotTriedForThem) {
  for (const GpuSharingSupport support :
       {GpuSharingSupport{false, false}, GpuSharingSupport{true, false}}) {
    std::vector<HandleKind> tried;
    auto choice = ChooseSharing(support, kGpu, [&](HandleKind kind) {
      tried.push_back(kind);
      return absl::OkStatus();
    });
    ASSERT_THAT(choice, IsOk());
    EXPECT_EQ(choice->kind, HandleKind::kLegacyIpc);
    EXPECT_THAT(tried, ElementsAre(HandleKind::kLegacyIpc));
    ASSERT_EQ(choice->fell_back.size(), 1u);
    EXPECT_THAT(choice->fell_back[0],
                HasSubstr(support.vmm ? "POSIX_FILE_DESCRIPTOR_SUPPORTED"
                                      : "MANAGEMENT_SUPPORTED"));
  }
}

TEST(RingSharingTest, AFailedKindFallsThroughAndNoneLeftIsARefusal) {
  auto legacy = ChooseSharing({true, true}, kGpu, [](HandleKind kind) {
    return kind == HandleKind::kVmmPosixFd
               ? absl::InternalError("cuMemCreate failed with CUDA_ERROR_X")
               : absl::OkStatus();
  });
  ASSERT_THAT(legacy, IsOk());
  EXPECT_EQ(legacy->kind, HandleKind::kLegacyIpc);
  EXPECT_THAT(
      legacy->fell_back,
      ElementsAre("vmm_posix_fd: cuMemCreate failed with CUDA_ERROR_X"));
  EXPECT_EQ(ToProto(legacy->kind), v1::CUDA_HANDLE_LEGACY_IPC);

  auto none = ChooseSharing({true, true}, kGpu, [](HandleKind kind) {
    return absl::InternalError(absl::StrCat(
        HandleKindName(kind) == "vmm_posix_fd" ? "cuMemCreate"
                                               : "cudaIpcGetMemHandle",
        " failed"));
  });
  EXPECT_THAT(
      none.status(),
      StatusIs(
          absl::StatusCode::kFailedPrecondition,
          AllOf(HasSubstr(absl::StrCat("cannot share a ring on GPU ", kGpu)),
                HasSubstr("vmm_posix_fd: cuMemCreate failed; "
                          "legacy_ipc: cudaIpcGetMemHandle "
                          "failed"))));
}

}  // namespace
}  // namespace stoker::transport
