#include "server/service/stream_spec.h"

#include <algorithm>
#include <limits>

namespace stoker::service {
namespace {

// a * b, or the largest uint64 where that overflows.
uint64_t SaturatingProduct(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product)
             ? std::numeric_limits<uint64_t>::max()
             : product;
}

}  // namespace

bool IsHelperJob(std::string_view job_id) {
  return job_id.substr(0, 7) == "helper:";
}

uint64_t EndPosition(const StreamSpec& spec, uint64_t steps_per_epoch) {
  uint64_t end = spec.epochs == 0
                     ? std::numeric_limits<uint64_t>::max()
                     : SaturatingProduct(spec.epochs, steps_per_epoch);
  if (spec.end_epoch != 0 || spec.end_step != 0) {
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    const uint64_t epochs = SaturatingProduct(spec.end_epoch, steps_per_epoch);
    const uint64_t until =
        epochs > kMax - spec.end_step ? kMax : epochs + spec.end_step;
    end = std::min(end, until);
  }
  return end;
}

}  // namespace stoker::service
