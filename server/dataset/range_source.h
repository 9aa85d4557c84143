// Where the files of a dataset that is not all local yet can be read by
// byte range: the dataset's source (an object store, an HTTP server, a
// mount). The dataset layer reads remote records through this interface
// only; server/storage adapts its Store to it (store_ranges.h), so this
// layer does not depend on the storage one.
//
// Thread-safe: implementations may be called from many threads at once.
#ifndef STOKER_SERVER_DATASET_RANGE_SOURCE_H_
#define STOKER_SERVER_DATASET_RANGE_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace stoker::dataset {

class RangeSource {
 public:
  virtual ~RangeSource() = default;

  // Where `file` is read from, for messages: never with a credential.
  virtual std::string Url(const std::string& file) const = 0;

  // Bytes [offset, offset + length) of `file`; length > 0. Retries what
  // may pass by itself; an error names the URL.
  virtual absl::StatusOr<std::string> Read(const std::string& file,
                                           uint64_t offset,
                                           uint64_t length) = 0;
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_RANGE_SOURCE_H_
