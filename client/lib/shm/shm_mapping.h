// The client's side of a shm ring (see ShmRing in local_transports.proto):
// fetching its descriptor from the daemon's fd socket and mapping it read-only.
#ifndef STOKER_CLIENT_LIB_SHM_SHM_MAPPING_H_
#define STOKER_CLIENT_LIB_SHM_SHM_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker {

// A ring mapped read-only. Batches that view it hold it, so it stays mapped
// until the last of them is gone.
struct ShmMapping {
  const uint8_t* base = nullptr;
  size_t bytes = 0;
  uint32_t slots = 0;
  size_t slot_bytes = 0;
  ~ShmMapping();
};

// A connection to the daemon's fd socket at `path` that has presented
// `token`, what the daemon hands out for it (a ring's descriptor, or a
// notice socket's verdict) still to be read. Its reads and writes time out
// after 10 s. FailedPrecondition, naming the `what` (e.g. "shm socket") and
// the path, when the socket cannot be reached.
absl::StatusOr<int> PresentToken(const std::string& path,
                                 const std::string& token, const char* what);

// Presents `token` on the fd socket at `path` and receives the descriptor
// the daemon hands over for it (an shm ring's memfd, a cuda_ipc ring's VMM
// handle), which the caller then owns. PermissionDenied when the daemon
// hands over none (this user may not have it), Unavailable when it does
// not answer.
absl::StatusOr<int> FetchDescriptor(const std::string& path,
                                    const std::string& token,
                                    const char* what);

// DataLoss for batch `b` naming a slot past the `slots` of `ring` (its
// name in the message): the daemon and the client disagree on the ring.
absl::Status SlotOutOfRange(const v1::Batch& b, const char* ring,
                            uint32_t slots);

// Fetches and maps a stream's ring: connects to the daemon's fd socket, sends
// the token and receives the memfd (see ShmRing in local_transports.proto).
absl::StatusOr<std::shared_ptr<ShmMapping>> MapShmRing(const v1::ShmRing& ring);

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_SHM_SHM_MAPPING_H_
