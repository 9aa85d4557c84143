#include "server/transport/cuda_ipc/ring_sharing.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::transport {
namespace {

absl::string_view Abs(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

std::string_view HandleKindName(HandleKind kind) {
  return kind == HandleKind::kVmmPosixFd ? "vmm_posix_fd" : "legacy_ipc";
}

v1::CudaHandleKind ToProto(HandleKind kind) {
  return kind == HandleKind::kVmmPosixFd ? v1::CUDA_HANDLE_VMM_POSIX_FD
                                         : v1::CUDA_HANDLE_LEGACY_IPC;
}

SharingPlan PlanSharing(const GpuSharingSupport& support) {
  SharingPlan plan;
  if (!support.vmm) {
    plan.left_out.push_back(
        "vmm_posix_fd: the GPU or driver has no virtual memory management "
        "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)");
  } else if (!support.posix_fd) {
    plan.left_out.push_back(
        "vmm_posix_fd: the driver cannot export allocations as file "
        "descriptors "
        "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED "
        "is 0)");
  } else {
    plan.order.push_back(HandleKind::kVmmPosixFd);
  }
  plan.order.push_back(HandleKind::kLegacyIpc);
  return plan;
}

absl::StatusOr<SharingChoice> ChooseSharing(
    const GpuSharingSupport& support, std::string_view gpu,
    const std::function<absl::Status(HandleKind)>& make) {
  SharingPlan plan = PlanSharing(support);
  SharingChoice choice;
  choice.fell_back = std::move(plan.left_out);
  for (HandleKind kind : plan.order) {
    const absl::Status made = make(kind);
    if (made.ok()) {
      choice.kind = kind;
      return choice;
    }
    choice.fell_back.push_back(
        absl::StrCat(Abs(HandleKindName(kind)), ": ", made.message()));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot share a ring on GPU ", Abs(gpu), ": ",
                   absl::StrJoin(choice.fell_back, "; ")));
}

}  // namespace stoker::transport
