#include "server/dataset/importers/tfrecord_format.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
    t[i] = c;
  }
  return t;
}

uint64_t Le(std::string_view b, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = v << 8 | static_cast<unsigned char>(b[i]);
  }
  return v;
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  static const std::array<uint32_t, 256> kTable = MakeTable();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = kTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t MaskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

absl::StatusOr<TfRecordListing> ListTfRecords(const RangeRead& read,
                                              uint64_t file_size) {
  TfRecordListing out;
  std::string header;
  uint64_t at = 0;
  auto stop = [&](std::string why) {
    out.broken = true;
    out.broken_at = at;
    out.why = std::move(why);
  };
  while (at < file_size) {
    if (file_size - at < kTfRecordHeaderBytes) {
      stop(absl::StrCat("truncated record header (", file_size - at,
                        " bytes left)"));
      break;
    }
    if (absl::Status s = read(at, kTfRecordHeaderBytes, &header); !s.ok()) {
      return s;
    }
    const uint64_t length = Le(header, 8);
    if (MaskCrc(Crc32c(std::string_view(header).substr(0, 8))) !=
        Le(std::string_view(header).substr(8), 4)) {
      stop("length CRC mismatch; the rest of the file cannot be framed");
      break;
    }
    const uint64_t room =
        file_size - at - kTfRecordHeaderBytes;  // For data and footer.
    if (room < kTfRecordFooterBytes || length > room - kTfRecordFooterBytes) {
      stop(absl::StrCat("truncated record: ", length,
                        " data bytes announced, ", room, " bytes left"));
      break;
    }
    out.records.push_back({at, length});
    at += kTfRecordHeaderBytes + length + kTfRecordFooterBytes;
  }
  return out;
}

absl::StatusOr<std::string_view> CheckTfRecord(std::string_view framed,
                                               uint64_t offset) {
  auto bad = [offset](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("record at byte ", offset, ": ", what));
  };
  if (framed.size() < kTfRecordHeaderBytes + kTfRecordFooterBytes) {
    return bad("truncated");
  }
  const uint64_t length = Le(framed, 8);
  if (MaskCrc(Crc32c(framed.substr(0, 8))) != Le(framed.substr(8), 4)) {
    return bad("length CRC mismatch");
  }
  if (length != framed.size() - kTfRecordHeaderBytes - kTfRecordFooterBytes) {
    return bad("length does not match the record");
  }
  const std::string_view data = framed.substr(kTfRecordHeaderBytes, length);
  if (MaskCrc(Crc32c(data)) !=
      Le(framed.substr(kTfRecordHeaderBytes + length), 4)) {
    return bad("data CRC mismatch");
  }
  return data;
}

}  // namespace stoker::dataset
