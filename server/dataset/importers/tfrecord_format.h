// TFRecord framing, as TensorFlow writes it (tensorflow/core/lib/io/
// record_writer.cc): each record is
//
//   u64 length | u32 masked_crc32c(length) | data | u32 masked_crc32c(data)
//
// little-endian, with masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
// Thread-safe: pure functions.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_TFRECORD_FORMAT_H_
#define STOKER_SERVER_DATASET_IMPORTERS_TFRECORD_FORMAT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker::dataset {

// CRC-32C (Castagnoli) of `data`, and TFRecord's mask of it.
uint32_t Crc32c(std::string_view data);
uint32_t MaskCrc(uint32_t crc);

inline constexpr uint64_t kTfRecordHeaderBytes = 12;
inline constexpr uint64_t kTfRecordFooterBytes = 4;

struct TfRecordEntry {
  uint64_t offset = 0;  // Of the record's header in the file.
  uint64_t length = 0;  // Of its data.
};

struct TfRecordListing {
  std::vector<TfRecordEntry> records;
  // Set when framing stopped early: the byte offset where, and why (a
  // length CRC mismatch, a truncated record). Records after it are lost.
  bool broken = false;
  uint64_t broken_at = 0;
  std::string why;
};

// Reads `size` bytes at `offset` into `out`.
using RangeRead =
    std::function<absl::Status(uint64_t offset, uint64_t size, std::string*)>;

// Walks the headers of a file of `file_size` bytes, checking each length's
// CRC; the data CRCs are checked by CheckTfRecord when each record is read.
// An error only when `read` fails.
absl::StatusOr<TfRecordListing> ListTfRecords(const RangeRead& read,
                                              uint64_t file_size);

// `framed` is one whole record (header, data, footer) starting at byte
// `offset`: DataLoss "record at byte N: data CRC mismatch" unless its CRCs
// hold. Returns a view of its data.
absl::StatusOr<std::string_view> CheckTfRecord(std::string_view framed,
                                               uint64_t offset);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_TFRECORD_FORMAT_H_
