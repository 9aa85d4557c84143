// DeviceBudget: the device memory cuda_ipc streams may hold on each GPU
// (config: device_memory_budget, per GPU). A stream reserves its ring and
// its staging buffer when it opens; the reservation goes with the last
// owner of the stream's device memory, so bytes count until the memory is
// really freed. A stream that does not fit is refused at once with
// RESOURCE_EXHAUSTED naming the budget, the GPU, the bytes in use and the
// bytes asked for (unlike memory_budget it does not wait: device memory
// comes back only when another trainer's stream ends).
//
// Thread-safe.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_BUDGET_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_BUDGET_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace stoker::transport {

class DeviceBudget : public std::enable_shared_from_this<DeviceBudget> {
 public:
  // Bytes held on one GPU; given back when destroyed.
  class Reservation {
   public:
    ~Reservation();
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    uint64_t bytes() const { return bytes_; }

   private:
    friend class DeviceBudget;
    Reservation(std::shared_ptr<DeviceBudget> budget, std::string gpu,
                uint64_t bytes)
        : budget_(std::move(budget)), gpu_(std::move(gpu)), bytes_(bytes) {}
    // Shared: a reservation may outlive the transport that made it (a
    // buffer the stream still holds at shutdown).
    const std::shared_ptr<DeviceBudget> budget_;
    const std::string gpu_;
    const uint64_t bytes_;
  };

  // Made shared: reservations hold their budget.
  static std::shared_ptr<DeviceBudget> Create(uint64_t bytes_per_gpu);

  // Reserves `bytes` on `gpu` (a UUID as the probe lists it) for `what`
  // ("a ring of 5 slots of 154.1 MiB and 36.8 MiB of staging").
  absl::StatusOr<std::unique_ptr<Reservation>> Reserve(const std::string& gpu,
                                                       uint64_t bytes,
                                                       std::string_view what);

  uint64_t bytes_per_gpu() const { return bytes_per_gpu_; }
  // Bytes reserved now, by GPU; a GPU that had reservations stays listed
  // (at 0), so its metric does not vanish.
  std::map<std::string, uint64_t> InUse() const;

 private:
  explicit DeviceBudget(uint64_t bytes_per_gpu)
      : bytes_per_gpu_(bytes_per_gpu) {}
  void Release(const std::string& gpu, uint64_t bytes);

  const uint64_t bytes_per_gpu_;
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> in_use_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_BUDGET_H_
