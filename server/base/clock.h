// The daemon's clock for durations: nanoseconds of std::chrono::steady_clock,
// the time the stage histograms, the worker pool's busy time and the helper
// placement measure in. One definition, so that every timestamp one part
// takes compares with those of another.
//
// Thread-safe.
#ifndef STOKER_SERVER_BASE_CLOCK_H_
#define STOKER_SERVER_BASE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace stoker {

// Nanoseconds since an arbitrary, fixed point; never goes backwards.
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace stoker

#endif  // STOKER_SERVER_BASE_CLOCK_H_
