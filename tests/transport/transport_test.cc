// The transport registry: every transport linked in is found by its number,
// and a number the daemon cannot serve is refused saying why.
#include "server/transport/transport.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::transport {
namespace {

using ::testing::HasSubstr;

TEST(TransportsTest, EachRegisteredTransportIsFoundByItsNumber) {
  TransportEnv env;
  env.unix_path = "/nonexistent/stoker.sock";  // Never started here.
  Transports transports(env);
  auto grpc = transports.Find(v1::TRANSPORT_GRPC);
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  EXPECT_FALSE((*grpc)->client_holds());
  // A client that names none gets grpc.
  auto unspecified = transports.Find(v1::TRANSPORT_UNSPECIFIED);
  ASSERT_TRUE(unspecified.ok());
  EXPECT_EQ(*unspecified, *grpc);
  auto shm = transports.Find(v1::TRANSPORT_SHM);
  ASSERT_TRUE(shm.ok()) << shm.status();
  EXPECT_TRUE((*shm)->client_holds());
  EXPECT_EQ(Transports::Name(v1::TRANSPORT_UNSPECIFIED), "grpc");
  EXPECT_EQ(Transports::Name(v1::TRANSPORT_SHM), "shm");
  EXPECT_EQ(Transports::Name(v1::TRANSPORT_CUDA_IPC), "cuda_ipc");
}

TEST(TransportsTest, ShmWithoutAUnixSocketIsRefusedSayingWhy) {
  Transports transports(TransportEnv{});
  auto shm = transports.Find(v1::TRANSPORT_SHM);
  ASSERT_TRUE(absl::IsFailedPrecondition(shm.status())) << shm.status();
  EXPECT_THAT(shm.status().message(), HasSubstr("listen.unix"));
  EXPECT_TRUE(transports.Find(v1::TRANSPORT_GRPC).ok());
}

TEST(TransportsTest, AnUnknownNumberIsAnInvalidArgument) {
  Transports transports(TransportEnv{});
  auto unknown = transports.Find(static_cast<v1::Transport>(42));
  ASSERT_TRUE(absl::IsInvalidArgument(unknown.status())) << unknown.status();
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("unknown transport number 42"));
}

TEST(TransportsTest, SharedRunsBuildInTheShmTransportsRings) {
  TransportEnv env;
  env.unix_path = "/nonexistent/stoker.sock";
  Transports transports(env);
  auto memory = transports.RunMemory(2, 4096, nullptr);
  ASSERT_TRUE(memory.ok()) << memory.status();
  ASSERT_NE(*memory, nullptr);
  std::unique_ptr<service::BatchBuffer> buffer = (*memory)->Take();
  ASSERT_NE(buffer, nullptr);
  EXPECT_NE(buffer->home().owner, nullptr) << "a slot of a ring";
}

}  // namespace
}  // namespace stoker::transport
