// WaitFor: how a test waits for something that happens on another thread or
// in another process, instead of sleeping for a guessed time.
//
// Thread-safe: it holds no state.
#ifndef STOKER_TESTS_TESTING_WAIT_FOR_H_
#define STOKER_TESTS_TESTING_WAIT_FOR_H_

#include <chrono>
#include <thread>

namespace stoker::testing {

// Polls `condition` every millisecond until it holds (true) or `timeout`
// has passed (false).
template <typename Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_WAIT_FOR_H_
