// When and how long to wait before trying a request again. A failure is
// worth retrying when it may pass: a 5xx answer, 408 or 429, a connection
// refused, cut or stalled. Waits grow exponentially up to a cap, each drawn
// in [half, whole] of its step (jitter, so that many nodes hitting one
// server do not retry in step).
//
// Thread-safe: pure functions of their arguments.
#ifndef STOKER_SERVER_STORAGE_RETRY_H_
#define STOKER_SERVER_STORAGE_RETRY_H_

#include "absl/time/time.h"

namespace stoker::storage {

struct RetryPolicy {
  int max_attempts = 6;  // Including the first; 1 never retries.
  absl::Duration first_wait = absl::Milliseconds(200);
  absl::Duration max_wait = absl::Seconds(10);
};

// Whether an answer with this HTTP status may succeed if asked again.
bool IsRetryableStatus(long http_status);

// The wait before attempt `attempt` + 1 (attempt counts from 1), for a
// `jitter` in [0, 1): min(max_wait, first_wait * 2^(attempt-1)) scaled to
// [1/2, 1).
absl::Duration RetryWait(const RetryPolicy& policy, int attempt, double jitter);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_RETRY_H_
