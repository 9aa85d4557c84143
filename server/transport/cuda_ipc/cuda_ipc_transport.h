// The cuda_ipc transport: batches written into a ring of device buffers on
// the trainer's GPU, named by UUID in the open (OpenStream.gpu_uuid).
//
// The stream's pipeline renders uint8 HWC on the CPU
// (formats_on_delivery); each batch is copied to the GPU and formatted
// there by the normalize kernel (device_outputs.h), into the stream's
// device ring, and announced on its notice socket once complete
// (cuda_ipc_delivery.h). The ring's descriptor (VMM) goes out on this
// transport's own descriptor socket, the daemon's unix socket path +
// ".cuda", with the shm socket's token and credential checks (FdServer).
//
// The refusals are FAILED_PRECONDITION saying why: this stokerd built
// without CUDA; the driver's own error; no GPU with that UUID (naming the
// ones this process sees); no unix socket; a pipeline part the device does
// not run (a batch op). The per-GPU device budget (device_budget.h) refuses
// with RESOURCE_EXHAUSTED. A client's list (cuda_ipc,shm,grpc) then falls
// back to the next transport.
//
// Thread-safe.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/cuda/cuda_probe.h"
#include "server/transport/cuda_ipc/cuda_ipc_delivery.h"
#include "server/transport/cuda_ipc/device_budget.h"
#include "server/transport/shm/fd_server.h"
#include "server/transport/transport.h"

namespace stoker::transport {

class CudaIpcTransport : public Transport {
 public:
  // `probe` is what this process's CUDA runtime answered (ProbeCuda());
  // it must outlive the transport.
  CudaIpcTransport(const TransportEnv& env, const cuda::CudaProbe& probe);

  // FAILED_PRECONDITION when this stokerd was built without CUDA, its
  // CUDA runtime sees no GPU (with the driver's error), or it has no unix
  // socket.
  absl::Status Available() const override;
  bool client_holds() const override { return true; }
  bool formats_on_delivery() const override { return true; }
  // INVALID_ARGUMENT without a gpu_uuid or with one that is not a UUID;
  // FAILED_PRECONDITION for a GPU this daemon cannot serve or a pipeline
  // it cannot finish there, saying why; RESOURCE_EXHAUSTED over the
  // device budget.
  absl::StatusOr<std::shared_ptr<Delivery>> Open(
      const OpenContext& context) override;
  absl::Status Start() override;
  void Stop() override;
  // Per GPU: device bytes reserved, batches, host-to-device bytes and
  // time, format stage time; the descriptor socket's refusals.
  std::vector<service::NamedCount> Counters() const override;

  const DeviceBudget& budget() const { return *budget_; }

 private:
  const cuda::CudaProbe& probe_;
  // Shared with the reservations of the streams' device memory.
  const std::shared_ptr<DeviceBudget> budget_;
  std::unique_ptr<FdServer> fd_server_;  // Null without a unix socket.
  mutable absl::Mutex mu_;
  // By GPU UUID as the probe lists it; shared with the streams on it.
  std::map<std::string, std::shared_ptr<CudaIpcCounts>> counts_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_TRANSPORT_H_
