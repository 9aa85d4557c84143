// How a cuda_ipc ring is shared with the trainer, and the order the kinds
// are tried in: CUDA's virtual memory API with a POSIX file descriptor
// first (it crosses PID namespaces, so it works between containers that
// share the socket directory), then the legacy cudaIpcGetMemHandle (one
// PID namespace only). A kind the GPU says it lacks is not tried; a kind
// whose calls fail falls through to the next, and the reason is kept, for
// the stream's log line and for the refusal when none works.
//
// Thread-safety: pure functions.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_RING_SHARING_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_RING_SHARING_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::transport {

enum class HandleKind { kVmmPosixFd, kLegacyIpc };

// "vmm_posix_fd" or "legacy_ipc", as logs and metrics say it.
std::string_view HandleKindName(HandleKind kind);
v1::CudaHandleKind ToProto(HandleKind kind);

// What the GPU says of itself (cuDeviceGetAttribute).
struct GpuSharingSupport {
  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED.
  bool vmm = false;
  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED.
  bool posix_fd = false;
  // With both: the recommended allocation granularity a VMM ring is
  // rounded up to (cuMemGetAllocationGranularity); else 0.
  size_t vmm_granularity = 0;
};

// The kinds to try on a GPU, in order, and why the others are left out.
struct SharingPlan {
  std::vector<HandleKind> order;
  std::vector<std::string> left_out;  // "vmm_posix_fd: ...".
};
SharingPlan PlanSharing(const GpuSharingSupport& support);

struct SharingChoice {
  HandleKind kind = HandleKind::kVmmPosixFd;
  // Why each kind tried or left out before it did not serve.
  std::vector<std::string> fell_back;
};

// Calls `make` for each kind of PlanSharing(support), in order, until one
// returns OK: that kind is chosen. When none does: FAILED_PRECONDITION
// naming `gpu` and every kind's reason.
absl::StatusOr<SharingChoice> ChooseSharing(
    const GpuSharingSupport& support, std::string_view gpu,
    const std::function<absl::Status(HandleKind)>& make);

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_RING_SHARING_H_
