// The probe as this build made it (with a toolkit: the CUDA path, which on
// a machine without a driver must refuse with the driver's error, never
// crash), and the pure rules of CheckGpuServable and DescribeCuda.
#include "server/cuda/cuda_probe.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::cuda {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kUuid[] = "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6c";
constexpr char kOtherUuid[] = "GPU-00000000-1111-2222-3333-444444444444";

CudaProbe TwoGpus() {
  CudaProbe probe;
  probe.built = true;
  probe.runtime_version = 13000;
  probe.driver_version = 13000;
  probe.gpus = {{0, kUuid, "NVIDIA H200", 150'000'000'000},
                {1, kOtherUuid, "NVIDIA H200", 150'000'000'000}};
  return probe;
}

TEST(FormatGpuUuidTest, WritesTheFormNvidiaSmiPrints) {
  const std::array<unsigned char, 16> bytes = {
      0x3f, 0x2a, 0x9c, 0x1e, 0x7b, 0x4d, 0x4e, 0x8a,
      0x9c, 0x0f, 0x1d, 0x2e, 0x3f, 0x4a, 0x5b, 0x6c};
  EXPECT_EQ(FormatGpuUuid(bytes), kUuid);
  EXPECT_EQ(FormatGpuUuid({}), "GPU-00000000-0000-0000-0000-000000000000");
}

TEST(CheckGpuServableTest, AListedGpuIsOkWithOrWithoutPrefixInAnyCase) {
  const CudaProbe probe = TwoGpus();
  EXPECT_THAT(CheckGpuServable(probe, kUuid), IsOk());
  EXPECT_THAT(CheckGpuServable(probe, "3F2A9C1E-7B4D-4E8A-9C0F-1D2E3F4A5B6C"),
              IsOk());
  EXPECT_THAT(CheckGpuServable(probe, kOtherUuid), IsOk());
}

TEST(CheckGpuServableTest, AnUnlistedGpuIsFailedPreconditionNamingTheListed) {
  CudaProbe probe = TwoGpus();
  const char kMissing[] = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
  EXPECT_THAT(
      CheckGpuServable(probe, kMissing),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr(absl::StrCat("no GPU with UUID ", kMissing)),
                     HasSubstr(absl::StrCat("sees: ", kUuid, ", ", kOtherUuid)),
                     Not(HasSubstr("CUDA_VISIBLE_DEVICES")))));
  probe.visible_devices = "1";
  EXPECT_THAT(CheckGpuServable(probe, kMissing),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("CUDA_VISIBLE_DEVICES='1' hides the others")));
}

TEST(CheckGpuServableTest, ADriverErrorIsFailedPreconditionInTheDriversWords) {
  CudaProbe probe;
  probe.built = true;
  probe.runtime_version = 13000;
  probe.driver_error =
      "cudaGetDeviceCount failed with cudaErrorNoDevice (no CUDA-capable "
      "device is detected)";
  EXPECT_THAT(CheckGpuServable(probe, kUuid),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(kUuid), HasSubstr("the CUDA driver: "),
                             HasSubstr(probe.driver_error))));
}

TEST(CheckGpuServableTest, ABinaryWithoutCudaSaysSo) {
  EXPECT_THAT(CheckGpuServable(CudaProbe{}, kUuid),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(kNotBuiltReason)));
}

TEST(CheckGpuServableTest, WhatIsNotAUuidIsInvalidArgument) {
  for (const char* bad :
       {"", "0", "GPU-", "GPU-3f2a9c1e7b4d4e8a9c0f1d2e3f4a5b6c",
        "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6",
        "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6g",
        "XPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6c"}) {
    EXPECT_THAT(CheckGpuServable(TwoGpus(), bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not of the form GPU-")))
        << "uuid '" << bad << "'";
  }
}

TEST(DescribeCudaTest, NamesEachGpuOrTheDriversReason) {
  EXPECT_EQ(DescribeCuda(TwoGpus()),
            absl::StrCat("built (runtime 13.0), driver 13.0; 2 GPUs: 0 ", kUuid,
                         " NVIDIA H200 139.7 GiB; 1 ", kOtherUuid,
                         " NVIDIA H200 139.7 GiB"));
  CudaProbe none;
  none.built = true;
  none.runtime_version = 13000;
  none.driver_error =
      "cudaGetDeviceCount failed with cudaErrorInsufficientDriver";
  none.visible_devices = "";
  EXPECT_EQ(DescribeCuda(none),
            "built (runtime 13.0), driver none; no GPU usable: "
            "cudaGetDeviceCount failed with cudaErrorInsufficientDriver "
            "(CUDA_VISIBLE_DEVICES='')");
  EXPECT_EQ(DescribeCuda(CudaProbe{}),
            "not built (STOKER_CUDA=OFF or no toolkit at build time)");
}

// From here on, the runtime of this process answers.

TEST(CudaProbeTest, AnswersAsTheBuildWasMadeAndAsksOnce) {
  const CudaProbe& probe = ProbeCuda();
  EXPECT_EQ(&probe, &ProbeCuda());
  EXPECT_EQ(probe.built, CudaSupportBuilt());
  if (!probe.built) {
    EXPECT_EQ(probe.runtime_version, 0);
    EXPECT_THAT(CheckGpuServable(kUuid),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr(kNotBuiltReason)));
    return;
  }
  EXPECT_GE(probe.runtime_version, 11000);
  // Either GPUs, or the reason there are none.
  EXPECT_TRUE(!probe.gpus.empty() || !probe.driver_error.empty());
}

TEST(CudaProbeTest, WithoutAUsableDriverRefusesWithTheDriversError) {
  const CudaProbe& probe = ProbeCuda();
  if (!probe.built)
    GTEST_SKIP() << "built without CUDA: " << DescribeCuda(probe);
  if (!probe.gpus.empty()) {
    GTEST_SKIP() << "this machine has a usable GPU: " << DescribeCuda(probe);
  }
  EXPECT_THAT(probe.driver_error,
              HasSubstr("cudaGetDeviceCount failed with cuda"));
  EXPECT_THAT(CheckGpuServable(kUuid),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("the CUDA driver: "),
                             HasSubstr(probe.driver_error))));
  EXPECT_THAT(DescribeCuda(probe),
              AllOf(HasSubstr("built (runtime "), HasSubstr("no GPU usable: "),
                    HasSubstr(probe.driver_error)));
}

TEST(CudaProbeTest, OnAGpuMachineEveryGpuIsListedAndServable) {
  const CudaProbe& probe = ProbeCuda();
  if (probe.gpus.empty()) {
    GTEST_SKIP() << "needs a GPU; this process has none: "
                 << DescribeCuda(probe);
  }
  EXPECT_GT(probe.driver_version, 0);
  for (size_t i = 0; i < probe.gpus.size(); ++i) {
    const GpuInfo& gpu = probe.gpus[i];
    EXPECT_EQ(gpu.index, static_cast<int>(i));
    EXPECT_THAT(gpu.uuid,
                MatchesRegex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
                             "[0-9a-f]{4}-[0-9a-f]{12}"));
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_GT(gpu.total_memory_bytes, 0u);
    EXPECT_THAT(CheckGpuServable(gpu.uuid), IsOk()) << DescribeCuda(probe);
  }
  EXPECT_THAT(CheckGpuServable("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("no GPU with UUID"),
                             HasSubstr(probe.gpus[0].uuid))));
}

}  // namespace
}  // namespace stoker::cuda
