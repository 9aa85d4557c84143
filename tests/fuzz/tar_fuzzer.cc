// Fuzzes the tar header reader (server/dataset/importers/tar_reader.h)
// over an archive in memory, as a WebDataset shard may hold it.
//
// What must hold: ListTarBytes never reads out of bounds (ASan), and every
// member it lists lies inside the archive.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/dataset/importers/tar_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view archive(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<stoker::dataset::TarListing> l =
      stoker::dataset::ListTarBytes(archive);
  if (!l.ok()) {
    if (l.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  for (const stoker::dataset::TarMember& m : l->files) {
    if (m.offset > size || m.size > size - m.offset) std::abort();
  }
  return 0;
}
