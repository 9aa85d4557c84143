#include "server/transport/cuda_ipc/device_budget.h"

#include "absl/strings/str_cat.h"
#include "server/service/admission.h"

namespace stoker::transport {

DeviceBudget::Reservation::~Reservation() { budget_->Release(gpu_, bytes_); }

std::shared_ptr<DeviceBudget> DeviceBudget::Create(uint64_t bytes_per_gpu) {
  return std::shared_ptr<DeviceBudget>(new DeviceBudget(bytes_per_gpu));
}

absl::StatusOr<std::unique_ptr<DeviceBudget::Reservation>>
DeviceBudget::Reserve(const std::string& gpu, uint64_t bytes,
                      std::string_view what) {
  {
    absl::MutexLock lock(&mu_);
    uint64_t& used = in_use_[gpu];
    if (bytes > bytes_per_gpu_ - used) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "device_memory_budget ", service::FormatBytes(bytes_per_gpu_),
          " on GPU ", gpu, " has ", service::FormatBytes(used),
          " in use; this stream's ",
          absl::string_view(what.data(), what.size()), " asks for ",
          service::FormatBytes(bytes),
          ": lower prefetch, hold or batch_size, or raise "
          "device_memory_budget"));
    }
    used += bytes;
  }
  return std::unique_ptr<Reservation>(
      new Reservation(shared_from_this(), gpu, bytes));
}

std::map<std::string, uint64_t> DeviceBudget::InUse() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

void DeviceBudget::Release(const std::string& gpu, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  in_use_[gpu] -= bytes;
}

}  // namespace stoker::transport
