// One cuda_ipc stream's delivery (transport.h's Delivery): the CPU pipeline
// builds each batch, rendered as uint8 HWC, in a pinned host buffer; on
// HandOver the batch is copied to a staging buffer on the trainer's GPU and
// the normalize kernel (or a device copy, for tensors the format stage
// leaves alone: device_outputs.h) writes it into a free slot of the
// stream's device ring, all queued on the stream's own CUDA stream, then an
// event is recorded. HandOver runs under the reactor's lock, so it never
// waits: the delivery's thread waits for each batch's event, in order, and
// only then sends its notice (on the notice socket, always on for
// cuda_ipc) and gives the host buffer back. So a notice means the tensors
// are complete on the device: the trainer reads them on any CUDA stream,
// with no event to share. The device slot is the client's until it
// acknowledges the batch.
//
// The ring is one device allocation shared as ring_sharing.h chooses (a VMM
// descriptor handed over on the cuda_ipc descriptor socket, or a legacy IPC
// handle in the header). The delivery owns every device allocation, and
// frees them when the stream ends or its client goes (a killed trainer's
// notice socket closes, the call ends, and the delivery with it). Its
// device bytes are reserved in the per-GPU budget for as long as they live.
//
// Only built with CUDA. Thread-safe.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_DELIVERY_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_DELIVERY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/transport/cuda_ipc/device_budget.h"
#include "server/transport/cuda_ipc/device_outputs.h"
#include "server/transport/shm/fd_server.h"
#include "server/transport/transport.h"

namespace stoker::transport {

// What every cuda_ipc stream of the daemon did, for /metrics.
struct CudaIpcCounts {
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> h2d_bytes{0};    // Host to device, uint8 renderings.
  std::atomic<uint64_t> h2d_nanos{0};    // Device time of those copies.
  std::atomic<uint64_t> kernel_nanos{0};  // Device time of the format stage.
};

struct CudaIpcOpen {
  int device = 0;          // The runtime ordinal of the GPU...
  std::string gpu_uuid;    // ...named as the request named it.
  uint32_t slots = 0;      // The stream's window.
  size_t host_bytes = 0;   // A rendered batch (OpenedStream::batch_bytes).
  size_t slot_bytes = 0;   // A formatted batch on the device.
  std::vector<DeviceOutput> outputs;
  FdServer* fd_server = nullptr;  // The cuda_ipc descriptor socket.
  SideChannel::Hooks hooks;
  DeviceBudget* budget = nullptr;
  std::shared_ptr<CudaIpcCounts> counts;
};

// Allocates the stream's device ring, staging buffer and pinned host
// buffers. RESOURCE_EXHAUSTED when the device budget has no room, or the
// GPU none; FAILED_PRECONDITION when no sharing kind works (ring_sharing.h)
// or CUDA fails, naming the call.
absl::StatusOr<std::shared_ptr<Delivery>> OpenCudaIpcDelivery(
    CudaIpcOpen open);

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_CUDA_IPC_DELIVERY_H_
