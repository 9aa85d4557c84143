#include "server/storage/retry.h"

#include <algorithm>

namespace stoker::storage {

bool IsRetryableStatus(long http_status) {
  return http_status >= 500 || http_status == 408 || http_status == 429;
}

absl::Duration RetryWait(const RetryPolicy& policy, int attempt,
                         double jitter) {
  absl::Duration step = policy.first_wait;
  for (int i = 1; i < attempt && step < policy.max_wait; ++i) step *= 2;
  step = std::min(step, policy.max_wait);
  jitter = std::clamp(jitter, 0.0, 1.0);
  return step * (0.5 + 0.5 * jitter);
}

}  // namespace stoker::storage
