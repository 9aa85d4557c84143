// The C++ client's transport registry: names, "auto", lists, and a
// transport the protocol knows but this client has no class for.
#include "client/lib/transport.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Names(absl::string_view spec) {
  auto defs = ParseTransports(spec);
  EXPECT_TRUE(defs.ok()) << defs.status();
  std::vector<std::string> names;
  if (defs.ok()) {
    for (const ClientTransportDef& d : *defs) names.push_back(d.name);
  }
  return names;
}

TEST(ClientTransportsTest, NamesAutoAndListsAreTriedInOrder) {
  EXPECT_EQ(Names("grpc"), std::vector<std::string>{"grpc"});
  EXPECT_EQ(Names(""), std::vector<std::string>{"grpc"});
  EXPECT_EQ(Names("auto"), (std::vector<std::string>{"shm", "grpc"}));
  EXPECT_EQ(Names("cuda_ipc, shm,grpc"),
            (std::vector<std::string>{"cuda_ipc", "shm", "grpc"}));
}

TEST(ClientTransportsTest, EachRegisteredTransportHasAClass) {
  auto defs = ParseTransports("grpc,shm");
  ASSERT_TRUE(defs.ok());
  for (const ClientTransportDef& d : *defs) {
    ASSERT_NE(d.make, nullptr) << d.name;
    std::unique_ptr<ClientTransport> t = d.make();
    v1::OpenStream open;
    t->Prepare(&open);
    // Only shm asks for its notice socket and the shared run's ring; only
    // shm's client holds batches until it releases them.
    EXPECT_EQ(open.notice_socket(), d.name == "shm");
    EXPECT_EQ(t->holds(), d.name == "shm");
    EXPECT_EQ(t->read_ahead(), d.name == "grpc");
  }
  EXPECT_EQ(TransportName(v1::TRANSPORT_SHM), "shm");
  EXPECT_EQ(TransportName(v1::TRANSPORT_UNSPECIFIED), "grpc");
}

TEST(ClientTransportsTest, CudaIpcAsksForANoticeSocketAndRefusesUnknownSlots) {
  auto defs = ParseTransports("cuda_ipc");
  ASSERT_TRUE(defs.ok()) << defs.status();
  ASSERT_EQ(defs->size(), 1u);
  EXPECT_EQ((*defs)[0].number, v1::TRANSPORT_CUDA_IPC);
  ASSERT_NE((*defs)[0].make, nullptr);
  std::unique_ptr<ClientTransport> cuda_ipc = (*defs)[0].make();
  v1::OpenStream open;
  open.set_gpu_uuid("GPU-00000000-1111-2222-3333-444444444444");
  cuda_ipc->Prepare(&open);
  EXPECT_TRUE(open.notice_socket());
  // A UUID the caller named is kept.
  EXPECT_EQ(open.gpu_uuid(), "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_TRUE(cuda_ipc->holds());
  // Nothing mapped yet: every slot is unknown.
  v1::Batch batch;
  batch.set_slot(0);
  EXPECT_TRUE(absl::IsDataLoss(cuda_ipc->Locate(batch).status()));
  // A header without a ring is refused before anything is mapped.
  EXPECT_FALSE(cuda_ipc->Attach(v1::StreamHeader()).ok());
}

TEST(ClientTransportsTest, AnUnknownNameSaysWhatIsKnown) {
  auto defs = ParseTransports("shm,carrier-pigeon");
  ASSERT_TRUE(absl::IsInvalidArgument(defs.status())) << defs.status();
  EXPECT_THAT(defs.status().message(),
              HasSubstr("'carrier-pigeon' is unknown; use grpc, shm, "
                        "cuda_ipc, auto"));
}

TEST(ClientTransportsTest, ShmRefusesABatchNamingASlotItDoesNotHave) {
  auto defs = ParseTransports("shm");
  ASSERT_TRUE(defs.ok());
  std::unique_ptr<ClientTransport> shm = (*defs)[0].make();
  v1::Batch batch;
  batch.set_slot(3);
  auto bytes = shm->Locate(batch);
  EXPECT_TRUE(absl::IsDataLoss(bytes.status())) << bytes.status();
}

}  // namespace
}  // namespace stoker
