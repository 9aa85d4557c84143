#include "server/transport/cuda_ipc/cuda_ipc_transport.h"

#include "absl/strings/str_cat.h"
#include "server/transport/cuda_ipc/device_outputs.h"

namespace stoker::transport {

#if !STOKER_CUDA_BUILT
// Never reached: Available() refuses every stream of such a build.
absl::StatusOr<std::shared_ptr<Delivery>> OpenCudaIpcDelivery(CudaIpcOpen) {
  return absl::FailedPreconditionError(
      absl::StrCat("transport cuda_ipc: ", cuda::kNotBuiltReason));
}
#endif

CudaIpcTransport::CudaIpcTransport(const TransportEnv& env,
                                   const cuda::CudaProbe& probe)
    : probe_(probe),
      budget_(DeviceBudget::Create(env.device_memory_budget)) {
  if (probe_.built && !env.unix_path.empty()) {
    fd_server_ = std::make_unique<FdServer>(env.unix_path + ".cuda",
                                            env.unix_mode, env.unix_group);
  }
}

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
  if (fd_server_ == nullptr) {
    return absl::FailedPreconditionError(
        "transport cuda_ipc needs the daemon's unix socket (listen.unix), "
        "which this daemon does not have; use transport grpc");
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
  absl::StatusOr<cuda::GpuInfo> gpu = cuda::FindServableGpu(probe_, uuid);
  if (!gpu.ok()) return gpu.status();
  const service::OpenedStream& opened = context.opened;
  if (opened.formatted == nullptr) {
    return absl::InternalError(
        "transport cuda_ipc: the stream was opened without its full bind");
  }
  absl::StatusOr<std::vector<DeviceOutput>> outputs = PlanDeviceOutputs(
      *opened.formatted, opened.stream->layout().per_sample());
  if (!outputs.ok()) return outputs.status();
  CudaIpcOpen open;
  open.device = gpu->index;
  open.gpu_uuid = uuid;
  open.slots = opened.window;
  open.host_bytes = opened.batch_bytes;
  open.slot_bytes =
      DeviceSlotBytes(*opened.formatted, opened.stream->spec().batch_size);
  open.outputs = *std::move(outputs);
  open.fd_server = fd_server_.get();
  open.hooks = context.hooks;
  open.budget = budget_.get();
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<CudaIpcCounts>& counts = counts_[gpu->uuid];
    if (counts == nullptr) counts = std::make_shared<CudaIpcCounts>();
    open.counts = counts;
  }
  return OpenCudaIpcDelivery(std::move(open));
}

absl::Status CudaIpcTransport::Start() {
  return fd_server_ != nullptr ? fd_server_->Start() : absl::OkStatus();
}

void CudaIpcTransport::Stop() {
  if (fd_server_ != nullptr) fd_server_->Stop();
}

std::vector<service::NamedCount> CudaIpcTransport::Counters() const {
  std::vector<service::NamedCount> out;
  for (const auto& [gpu, bytes] : budget_->InUse()) {
    service::NamedCount c{
        "stoker_cuda_device_bytes",
        "Device memory cuda_ipc streams hold now (rings, staging, tables), "
        "per GPU; device_memory_budget bounds it.",
        static_cast<double>(bytes), true, {{"gpu", gpu}}};
    out.push_back(std::move(c));
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [gpu, counts] : counts_) {
    const CudaIpcCounts& k = *counts;
    const auto add = [&, gpu = gpu](const char* metric, const char* help,
                                    double value) {
      out.push_back({metric, help, value, false, {{"gpu", gpu}}});
    };
    add("stoker_cuda_batches_total",
        "Batches cuda_ipc streams completed on the device.",
        static_cast<double>(k.batches.load()));
    add("stoker_cuda_h2d_bytes_total",
        "Bytes copied from pinned host memory to the GPU for cuda_ipc "
        "streams (uint8 renderings).",
        static_cast<double>(k.h2d_bytes.load()));
    add("stoker_cuda_h2d_seconds_total",
        "Device time of those copies (CUDA events).",
        k.h2d_nanos.load() / 1e9);
    add("stoker_cuda_kernel_seconds_total",
        "Device time of the format stage on the GPU (normalize kernel and "
        "copies into the slot).",
        k.kernel_nanos.load() / 1e9);
  }
  if (fd_server_ != nullptr) {
    const FdServer::Stats s = fd_server_->GetStats();
    out.push_back({"stoker_cuda_socket_refused_total",
                   "Connections to the cuda_ipc descriptor socket closed at "
                   "once (over FdServer's bounds).",
                   static_cast<double>(s.refused), false, {}});
    out.push_back({"stoker_cuda_socket_timed_out_total",
                   "Connections to the cuda_ipc descriptor socket dropped for "
                   "not presenting their token in time.",
                   static_cast<double>(s.timed_out), false, {}});
  }
  return out;
}

namespace {
std::unique_ptr<Transport> MakeCudaIpcTransport(const TransportEnv& env) {
  return std::make_unique<CudaIpcTransport>(env, cuda::ProbeCuda());
}
}  // namespace

STOKER_REGISTER_TRANSPORT(v1::TRANSPORT_CUDA_IPC, "cuda_ipc",
                          MakeCudaIpcTransport);

}  // namespace stoker::transport
