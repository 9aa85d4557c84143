// A reader of tar archive headers, enough for WebDataset shards: POSIX
// ustar (name plus prefix), GNU long names ('L' entries) and pax extended
// headers ('x': path and size), octal and GNU base-256 sizes. It lists the
// regular-file members and where their bytes lie; it never follows links
// and never writes anything.
//
// Thread-safe: no shared state.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_TAR_READER_H_
#define STOKER_SERVER_DATASET_IMPORTERS_TAR_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker::dataset {

struct TarMember {
  std::string name;     // Path inside the archive.
  uint64_t offset = 0;  // Of its first data byte in the archive.
  uint64_t size = 0;
};

struct TarListing {
  std::vector<TarMember> files;  // Regular files, in archive order.
  // Members that are neither files nor folders (links, devices), by name.
  std::vector<std::string> others;
};

// Reads `size` bytes at `offset` of the archive into `out`.
using TarRead =
    std::function<absl::Status(uint64_t offset, uint64_t size, std::string*)>;

// Walks the headers of an archive of `archive_size` bytes. DataLoss naming
// the byte offset of the header for a bad checksum, a bad number field, a
// member that runs past the end, or a malformed pax record.
absl::StatusOr<TarListing> ListTar(const TarRead& read, uint64_t archive_size);

// ListTar over an archive held in memory (tests, fuzzing).
absl::StatusOr<TarListing> ListTarBytes(std::string_view archive);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_TAR_READER_H_
