// The cuda_ipc transport end to end, on a GPU: the C++ client reads each
// batch from the daemon's device ring, and every tensor, copied back to the
// host, equals what shm delivers for the same stream (the CPU pipeline's
// normalize + layout, bit for bit). Skips, saying why, where this process
// sees no GPU; tests/gpu/run.sh runs it on one.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/consume.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;

using CudaIpcGpuTest = testing::TestServerTest;

// Why this process cannot run a device test, or empty.
std::string NoGpu() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return std::string("no usable GPU here: ") + cudaGetErrorString(e);
  }
  return count == 0 ? "no GPU here" : "";
}

StreamOptions Options(const std::string& transport) {
  StreamOptions o =
      testing::TestStream("train", 8, /*seed=*/3, /*epochs=*/2, transport);
  o.hold = 2;
  return o;
}

// A batch's tensors as host bytes, copied from the device where they are.
std::string HostBytes(const Batch& batch) {
  std::string out;
  for (const TensorView& t : batch.tensors()) {
    std::string bytes(t.size, '\0');
    if (t.device >= 0) {
      EXPECT_EQ(cudaMemcpy(bytes.data(), t.data, t.size, cudaMemcpyDeviceToHost),
                cudaSuccess);
    } else {
      bytes.assign(reinterpret_cast<const char*>(t.data), t.size);
    }
    out += bytes;
  }
  return out;
}

std::vector<std::string> ReadAll(const std::string& target,
                                 const StreamOptions& o, bool on_device) {
  auto client = Client::Connect(target);
  auto stream = client->OpenStream(o);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  EXPECT_EQ((*stream)->info().transport, o.transport);
  std::vector<std::string> batches;
  Batch batch;
  absl::Status s;
  while ((s = (*stream)->Next(&batch)).ok()) {
    for (const TensorView& t : batch.tensors()) {
      EXPECT_EQ(t.device >= 0, on_device) << t.name;
    }
    batches.push_back(HostBytes(batch));
  }
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  return batches;
}

TEST_F(CudaIpcGpuTest, DeviceBatchesEqualTheCpuPipelinesBitForBit) {
  if (std::string why = NoGpu(); !why.empty()) GTEST_SKIP() << why;
  const auto shm = ReadAll(server_->target(), Options("shm"), false);
  const auto cuda = ReadAll(server_->target(), Options("cuda_ipc"), true);
  ASSERT_EQ(shm.size(), 14u);
  ASSERT_EQ(cuda.size(), shm.size());
  for (size_t i = 0; i < shm.size(); ++i) {
    EXPECT_TRUE(cuda[i] == shm[i]) << "batch " << i;
  }
}

TEST_F(CudaIpcGpuTest, HeldBatchesKeepTheirSlotsUntilReleased) {
  if (std::string why = NoGpu(); !why.empty()) GTEST_SKIP() << why;
  StreamOptions o = Options("cuda_ipc");
  o.prefetch = 2;
  o.epochs = 3;
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int read = testing::ReadHolding(**stream, 2, HostBytes);
  EXPECT_EQ(read, 21);
}

TEST_F(CudaIpcGpuTest, AGpuThisDaemonDoesNotSeeIsRefusedAndAListFallsBack) {
  if (std::string why = NoGpu(); !why.empty()) GTEST_SKIP() << why;
  StreamOptions o = Options("cuda_ipc,shm");
  o.gpu_uuid = "GPU-00000000-1111-2222-3333-444444444444";
  auto client = Client::Connect(server_->target());
  auto stream = client->OpenStream(o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->info().transport, "shm");
  EXPECT_THAT((*stream)->info().fallbacks,
              HasSubstr("no GPU with UUID GPU-00000000-1111"));
}

}  // namespace
}  // namespace stoker
