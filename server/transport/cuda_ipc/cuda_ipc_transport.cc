#include "server/transport/cuda_ipc/cuda_ipc_transport.h"

#include "absl/strings/str_cat.h"

namespace stoker::transport {

CudaIpcTransport::CudaIpcTransport(const TransportEnv& env,
                                   const cuda::CudaProbe& probe)
    : probe_(probe), budget_(DeviceBudget::Create(env.device_memory_budget)) {}

absl::Status CudaIpcTransport::Available() const {
  if (!probe_.built) {
    return absl::FailedPreconditionError(
        absl::StrCat("transport cuda_ipc: ", cuda::kNotBuiltReason));
  }
  if (probe_.gpus.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("transport cuda_ipc: this stokerd sees no GPU: ",
                     probe_.driver_error.empty() ? "the CUDA runtime lists none"
                                                 : probe_.driver_error));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Delivery>> CudaIpcTransport::Open(
    const OpenContext& context) {
  const std::string& uuid = context.open.gpu_uuid();
  if (uuid.empty()) {
    return absl::InvalidArgumentError(
        "transport cuda_ipc needs gpu_uuid: the trainer's GPU by UUID, as "
        "nvidia-smi -L prints it (device indices differ between processes)");
  }
  if (absl::Status servable = cuda::CheckGpuServable(probe_, uuid);
      !servable.ok()) {
    return servable;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "transport cuda_ipc: GPU ", uuid,
      " is here, but this stokerd cannot build batches in device memory yet "
      "(the device ring is not implemented); use shm"));
}

namespace {
std::unique_ptr<Transport> MakeCudaIpcTransport(const TransportEnv& env) {
  return std::make_unique<CudaIpcTransport>(env, cuda::ProbeCuda());
}
}  // namespace

STOKER_REGISTER_TRANSPORT(v1::TRANSPORT_CUDA_IPC, "cuda_ipc",
                          MakeCudaIpcTransport);

}  // namespace stoker::transport
