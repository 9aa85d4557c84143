// How the open path tells a dataset that is being staged (copied from its
// `source` by stokerd, server/staging/) from one that does not exist.
//
// StreamService::Prepare asks ServiceOptions::staging about a dataset its
// catalog lacks. A dataset still being staged answers with a status marked
// by StagingStatus(): the Opener then parks the open and tries it again
// until the dataset is in the catalog or the open's wait (the request's
// deadline, at most limits.admission_wait) is over, when it answers with
// the last progress it was told. A dataset whose staging failed answers
// with that error (never Unavailable: no retry can pass before a reload),
// which ends the open at once.
//
// Thread-safety: pure functions.
#ifndef STOKER_SERVER_SERVICE_STAGING_WAIT_H_
#define STOKER_SERVER_SERVICE_STAGING_WAIT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace stoker::service {

// What the daemon knows of a dataset missing from the catalog: OK when it
// is not staged at all (so: not served), a StagingStatus while its copy is
// under way, or the error that ended its staging.
using StagingLookup = std::function<absl::Status(const std::string& dataset)>;

// Unavailable, marked as "still staging"; `progress` says how far it is.
absl::Status StagingStatus(const std::string& dataset,
                           const std::string& progress);
bool IsStaging(const absl::Status& status);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STAGING_WAIT_H_
