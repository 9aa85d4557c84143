// Fuzzes TFRecord framing and the tf.train.Example reader
// (server/dataset/importers/{tfrecord_format,example_proto}.h).
//
// A random record almost never carries matching CRCs, so the first byte
// chooses a mode: odd, the rest is one record's data, framed here with
// correct CRCs; even, the rest is a whole file as it is.
//
// What must hold: no out-of-bounds read (ASan); records lie inside the
// file; a record whose CRCs check parses as an Example or is DataLoss.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/dataset/importers/example_proto.h"
#include "server/dataset/importers/tfrecord_format.h"

namespace {

using stoker::dataset::Crc32c;
using stoker::dataset::MaskCrc;

std::string Le(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}

void CheckExample(std::string_view data) {
  absl::StatusOr<stoker::dataset::ExampleFeatures> e =
      stoker::dataset::ParseExample(data);
  if (!e.ok() && e.status().code() != absl::StatusCode::kDataLoss) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  std::string file;
  if (data[0] & 1) {
    const std::string len = Le(rest.size(), 8);
    file = len + Le(MaskCrc(Crc32c(len)), 4) + std::string(rest) +
           Le(MaskCrc(Crc32c(rest)), 4);
  } else {
    file = std::string(rest);
  }
  absl::StatusOr<stoker::dataset::TfRecordListing> l =
      stoker::dataset::ListTfRecords(
          [&file](uint64_t off, uint64_t n, std::string* out) {
            if (off > file.size() || n > file.size() - off) std::abort();
            out->assign(file, off, n);
            return absl::OkStatus();
          },
          file.size());
  if (!l.ok()) std::abort();  // Only a failed read is an error.
  if ((data[0] & 1) && l->records.size() != 1) std::abort();
  for (const stoker::dataset::TfRecordEntry& r : l->records) {
    const uint64_t framed = 16 + r.length;
    if (r.offset > file.size() || framed > file.size() - r.offset) {
      std::abort();
    }
    absl::StatusOr<std::string_view> record =
        stoker::dataset::CheckTfRecord(
            std::string_view(file).substr(r.offset, framed), r.offset);
    if (record.ok()) CheckExample(*record);
  }
  CheckExample(rest);
  return 0;
}
