// A StatusIs matcher for absl::Status and absl::StatusOr in the pipeline
// tests (absl 20220623 ships none).
#ifndef STOKER_TESTS_PIPELINE_STATUS_MATCHERS_H_
#define STOKER_TESTS_PIPELINE_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace stoker::pipeline::testing {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}

template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches a Status or StatusOr whose code is `code` and whose message
// matches `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher, "") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

MATCHER(IsOk, "") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.ok();
}

}  // namespace stoker::pipeline::testing

#endif  // STOKER_TESTS_PIPELINE_STATUS_MATCHERS_H_
