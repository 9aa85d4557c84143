#include "server/service/staging_wait.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace stoker::service {
namespace {

constexpr char kStagingPayload[] = "stoker.dev/dataset-staging";

}  // namespace

absl::Status StagingStatus(const std::string& dataset,
                           const std::string& progress) {
  absl::Status s = absl::UnavailableError(absl::StrCat(
      "dataset '", dataset, "' is being staged onto local disk: ", progress));
  s.SetPayload(kStagingPayload, absl::Cord("1"));
  return s;
}

bool IsStaging(const absl::Status& status) {
  return status.GetPayload(kStagingPayload).has_value();
}

}  // namespace stoker::service
