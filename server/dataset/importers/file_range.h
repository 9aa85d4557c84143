// File helpers the shard-based importers share: the shard files a SRC
// names, and reads of one byte range. Thread-safe: no shared state.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_FILE_RANGE_H_
#define STOKER_SERVER_DATASET_IMPORTERS_FILE_RANGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::dataset {

// The files `src` names, sorted: `src` itself if it is a file; the files in
// folder `src` whose names end in `suffix` (".tar"); or the files a glob
// pattern ("shards/train-*.tar") matches. NotFound if there are none.
absl::StatusOr<std::vector<std::string>> ExpandShardFiles(
    const std::string& src, std::string_view suffix);

// One file open for reads of byte ranges, for listing a shard's headers
// without an open per header. Thread-compatible.
class RangeFile {
 public:
  RangeFile() = default;
  RangeFile(const RangeFile&) = delete;
  RangeFile& operator=(const RangeFile&) = delete;
  ~RangeFile();

  // An errno status naming no path.
  absl::Status Open(const std::string& path);
  // As ReadRange. REQUIRES: Open returned OK.
  absl::Status Read(uint64_t offset, uint64_t size, std::string* out) const;

 private:
  int fd_ = -1;
};

// Opens the shard `path` (`size` bytes) once and lists it with
// `list(read, size)`, `read` reading byte ranges of it: the shape of
// ListTar and ListTfRecords. An open error names no path.
template <typename Listing, typename Lister>
absl::StatusOr<Listing> ListShardFile(const std::string& path, uint64_t size,
                                      Lister list) {
  RangeFile file;
  if (absl::Status opened = file.Open(path); !opened.ok()) return opened;
  return list(
      [&file](uint64_t offset, uint64_t n, std::string* out) {
        return file.Read(offset, n, out);
      },
      size);
}

// Reads `size` bytes at `offset` of `path` into `out`. DataLoss if the
// file is shorter (truncated since it was listed), an errno status
// otherwise; messages do not name the path.
absl::Status ReadRange(const std::string& path, uint64_t offset,
                       uint64_t size, std::string* out);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_FILE_RANGE_H_
