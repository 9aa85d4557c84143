// The CUDA driver table the daemon's ring and the client's mapping share:
// found whole where there is a driver, else refused naming the first call;
// the teardown touches only what was made; errors name the call.
#include "server/cuda/cuda_driver.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cuda/cuda_probe.h"

namespace stoker::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaDriverTest, TheTableIsWholeWithADriverElseNamesTheFirstCall) {
  const DriverApi& d = Driver();
  EXPECT_EQ(&d, &Driver());  // Looked up once.
  if (ProbeCuda().driver_version == 0) {
    EXPECT_EQ(d.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(d.status.message(),
                HasSubstr("the CUDA driver has no cuDeviceGet (ABI 12.0)"));
    EXPECT_EQ(d.DeviceGet, nullptr);
    EXPECT_EQ(d.MemImportFromShareableHandle, nullptr);
    return;
  }
  ASSERT_TRUE(d.status.ok()) << d.status;
  for (const void* fn :
       {reinterpret_cast<const void*>(d.DeviceGet),
        reinterpret_cast<const void*>(d.DeviceGetAttribute),
        reinterpret_cast<const void*>(d.GetErrorName),
        reinterpret_cast<const void*>(d.MemGetAllocationGranularity),
        reinterpret_cast<const void*>(d.MemCreate),
        reinterpret_cast<const void*>(d.MemRelease),
        reinterpret_cast<const void*>(d.MemAddressReserve),
        reinterpret_cast<const void*>(d.MemAddressFree),
        reinterpret_cast<const void*>(d.MemMap),
        reinterpret_cast<const void*>(d.MemUnmap),
        reinterpret_cast<const void*>(d.MemSetAccess),
        reinterpret_cast<const void*>(d.MemExportToShareableHandle),
        reinterpret_cast<const void*>(d.MemImportFromShareableHandle)}) {
    EXPECT_NE(fn, nullptr);
  }
}

TEST(CudaDriverTest, TheTeardownOfNothingCallsNoDriverFunction) {
  // Every call of this table is null: one called would crash.
  const DriverApi none;
  UnmapAndRelease(none, 0, 4096, 0);
}

TEST(CudaDriverTest, AnErrorNamesTheCallAndTheResult) {
  const DriverApi none;  // No cuGetErrorName: the number is the name.
  const absl::Status s =
      DriverError(none, "cuMemMap", CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "cuMemMap failed with CUresult 2");
}

}  // namespace
}  // namespace stoker::cuda
