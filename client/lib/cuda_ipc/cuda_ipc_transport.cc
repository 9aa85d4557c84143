// The cuda_ipc transport, client side: the stream's ring of device slots,
// on the GPU the open named by UUID (StreamOptions::gpu_uuid, else the
// calling thread's current device), is mapped once from the header (VMM:
// the descriptor fetched from the ring's fd socket; legacy: the handle in
// the header), and batches are announced on the notice socket. A message
// names a slot; its tensors are device memory there (TensorView::device),
// complete when the notice arrives: the daemon announces a batch only once
// its copy and format kernel have finished, so the caller reads the
// tensors on any CUDA stream without waiting on an event. The slot is the
// caller's until it releases the batch; work that reads the tensors must
// have completed by then (synchronize the stream it ran on first).
#include <memory>

#include "client/lib/cuda_ipc/device_mapping.h"
#include "client/lib/shm/notice_socket.h"
#include "client/lib/shm/shm_mapping.h"
#include "client/lib/transport.h"

namespace stoker {
namespace {

class CudaIpcClientTransport : public ClientTransport {
 public:
  void Prepare(v1::OpenStream* open) override {
    open->set_notice_socket(true);
    if (open->gpu_uuid().empty()) {
      // An error here leaves it empty, and the daemon's refusal says so.
      absl::StatusOr<std::string> current = CurrentGpuUuid();
      if (current.ok()) open->set_gpu_uuid(*current);
    }
  }

  absl::Status Attach(const v1::StreamHeader& header) override {
    if (!header.has_cuda_ipc()) {
      return absl::InternalError("a cuda_ipc stream's header names no ring");
    }
    const v1::CudaIpcRing& ring = header.cuda_ipc();
    absl::StatusOr<int> device = FindGpuByUuid(ring.gpu_uuid());
    if (!device.ok()) return device.status();
    int fd = -1;
    if (ring.handle_kind() == v1::CUDA_HANDLE_VMM_POSIX_FD) {
      absl::StatusOr<int> fetched =
          FetchDescriptor(ring.fd_socket(), ring.token(), "cuda_ipc socket");
      if (!fetched.ok()) return fetched.status();
      fd = *fetched;
    }
    absl::StatusOr<std::shared_ptr<DeviceMapping>> mapping =
        DeviceMapping::Map(ring, fd, *device);
    if (!mapping.ok()) return mapping.status();
    mapping_ = *std::move(mapping);
    slots_ = ring.slots();
    slot_bytes_ = ring.slot_bytes();
    if (!header.has_notices()) {
      return absl::InternalError(
          "a cuda_ipc stream's header names no notice socket");
    }
    auto notices = NoticeSocket::Connect(header.notices());
    if (!notices.ok()) return notices.status();
    notices_ = *std::move(notices);
    return absl::OkStatus();
  }

  bool read_ahead() const override { return false; }
  bool holds() const override { return true; }

  absl::StatusOr<BatchBytes> Locate(const v1::Batch& b) override {
    if (mapping_ == nullptr || b.slot() >= slots_) {
      return SlotOutOfRange(b, "the stream's device ring", slots_);
    }
    BatchBytes bytes{mapping_->base() + b.slot() * slot_bytes_, slot_bytes_,
                     mapping_};
    bytes.device = mapping_->device();
    return bytes;
  }

  ClientSideChannel* side_channel() override { return notices_.get(); }

 private:
  std::shared_ptr<DeviceMapping> mapping_;
  uint32_t slots_ = 0;
  size_t slot_bytes_ = 0;
  std::unique_ptr<NoticeSocket> notices_;
};

std::unique_ptr<ClientTransport> MakeCudaIpcClientTransport() {
  return std::make_unique<CudaIpcClientTransport>();
}

}  // namespace

// Not in "auto": it puts batches on a GPU, which a caller asks for by name.
STOKER_REGISTER_CLIENT_TRANSPORT(v1::TRANSPORT_CUDA_IPC, "cuda_ipc",
                                 /*auto_place=*/0,
                                 MakeCudaIpcClientTransport);

}  // namespace stoker
