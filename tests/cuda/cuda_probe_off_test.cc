// The probe compiled without CUDA (STOKER_CUDA_BUILT=0), as on a machine
// with no toolkit: it says so and refuses every GPU with that reason.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cuda/cuda_probe.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::cuda {
namespace {

using ::stoker::pipeline::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kUuid[] = "GPU-3f2a9c1e-7b4d-4e8a-9c0f-1d2e3f4a5b6c";

TEST(CudaProbeOffTest, SaysItWasBuiltWithoutCuda) {
  EXPECT_FALSE(CudaSupportBuilt());
  const CudaProbe& probe = ProbeCuda();
  EXPECT_FALSE(probe.built);
  EXPECT_EQ(probe.runtime_version, 0);
  EXPECT_EQ(probe.driver_version, 0);
  EXPECT_THAT(probe.gpus, IsEmpty());
  EXPECT_EQ(DescribeCuda(probe),
            "not built (STOKER_CUDA=OFF or no toolkit at build time)");
}

TEST(CudaProbeOffTest, RefusesEveryGpuAsFailedPreconditionSayingWhy) {
  EXPECT_THAT(
      CheckGpuServable(kUuid),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("this stokerd was built without CUDA support "
                         "(STOKER_CUDA=OFF or no toolkit at build time)")));
  EXPECT_THAT(
      CheckGpuServable(kUuid),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(kUuid)));
}

TEST(CudaProbeOffTest, AMalformedUuidIsStillInvalidArgument) {
  EXPECT_THAT(CheckGpuServable("0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")));
}

}  // namespace
}  // namespace stoker::cuda
