// The cuda_ipc transport compiled without CUDA (STOKER_CUDA_BUILT=0), as on
// a machine with no toolkit: the daemon's registry still finds it, and it
// refuses every stream, and the kernel, saying this stokerd was built
// without CUDA.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cuda/cuda_probe.h"
#include "server/transport/cuda_ipc/device_normalize.h"
#include "server/transport/transport.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::transport {
namespace {

using ::stoker::pipeline::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(CudaIpcOffTest, TheTransportIsRegisteredAndRefusesSayingWhy) {
  ASSERT_FALSE(cuda::CudaSupportBuilt());
  Transports transports(TransportEnv{});
  EXPECT_THAT(transports.Find(v1::TRANSPORT_CUDA_IPC).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("transport cuda_ipc"),
                             HasSubstr(cuda::kNotBuiltReason))));
}

TEST(CudaIpcOffTest, TheKernelIsRefusedSayingWhy) {
  NormalizePlan plan;
  plan.height = plan.width = 2;
  EXPECT_THAT(NormalizeOnDevice(plan, nullptr, nullptr, 1, nullptr, nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(cuda::kNotBuiltReason)));
}

}  // namespace
}  // namespace stoker::transport
