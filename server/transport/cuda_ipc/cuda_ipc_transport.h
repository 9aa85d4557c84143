// The cuda_ipc transport: batches written into a ring of device buffers on
// the trainer's GPU, named by UUID in the open (OpenStream.gpu_uuid).
//
// What is here: the refusals, each FAILED_PRECONDITION saying why (this
// stokerd built without CUDA; the driver's own error; no GPU with that
// UUID, naming the ones this process sees), the per-GPU device memory
// budget (device_budget.h), the order in which the ring's sharing kinds are
// tried (ring_sharing.h) and the normalize kernel with its host reference
// (device_normalize.h). The device ring, the host side that renders uint8
// for it, and the announcement on completion are not built yet, so a
// stream on a GPU this daemon could serve is refused too, saying so; a
// client's list (cuda_ipc,shm,grpc) then falls back to the next transport.
//
// Thread-safe.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_

#include <memory>

#include "server/cuda/cuda_probe.h"
#include "server/transport/cuda_ipc/device_budget.h"
#include "server/transport/transport.h"

namespace stoker::transport {

class CudaIpcTransport : public Transport {
 public:
  // `probe` is what this process's CUDA runtime answered (ProbeCuda());
  // it must outlive the transport.
  CudaIpcTransport(const TransportEnv& env, const cuda::CudaProbe& probe);

  // FAILED_PRECONDITION when this stokerd was built without CUDA or its
  // CUDA runtime sees no GPU (with the driver's error).
  absl::Status Available() const override;
  bool client_holds() const override { return true; }
  // INVALID_ARGUMENT without a gpu_uuid or with one that is not a UUID;
  // FAILED_PRECONDITION for a GPU this daemon cannot serve, saying why.
  absl::StatusOr<std::shared_ptr<Delivery>> Open(
      const OpenContext& context) override;

  const DeviceBudget& budget() const { return *budget_; }

 private:
  const cuda::CudaProbe& probe_;
  // Shared with the reservations of the streams' device memory.
  const std::shared_ptr<DeviceBudget> budget_;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_
