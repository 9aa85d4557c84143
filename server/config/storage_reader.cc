#include "server/config/storage_reader.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/config/config_reference.h"
#include "server/config/value_readers.h"

namespace stoker::config::internal {
namespace {

void ReadS3(const MapEntry& entry, const std::filesystem::path& base_dir,
            StorageOptions* out, Diagnostics& diag) {
  if (!ExpectMap(entry, "storage.s3", "{region: us-east-1}", diag)) return;
  for (const MapEntry& e :
       ReadMap(entry.value, "storage.s3", AllowedKeys("storage.s3"), diag)) {
    const std::string key = absl::StrCat("storage.s3.", e.key);
    if (e.key == "region") {
      if (auto v = ReadString(e, key, "a region like us-east-1", diag)) {
        out->s3_region = *v;
      }
    } else if (e.key == "endpoint") {
      if (auto v = ReadString(e, key, "a URL like http://minio:9000", diag)) {
        if (!absl::StartsWith(*v, "http://") &&
            !absl::StartsWith(*v, "https://")) {
          diag.Error(e.value_mark,
                     absl::StrCat(key, ": '", *v,
                                  "' is not an http:// or https:// URL"));
        } else {
          out->s3_endpoint = *v;
        }
      }
    } else if (e.key == "profile") {
      if (auto v = ReadString(e, key, "a profile name", diag)) {
        out->s3_profile = *v;
      }
    } else if (e.key == "credentials_file") {
      if (auto v = ReadString(e, key, "a file path", diag)) {
        out->s3_credentials_file = ResolvePath(base_dir, *v);
      }
    }
  }
}

// A whole number in [min, max] into *out.
void ReadWhole(const MapEntry& e, const std::string& key, uint32_t min,
               uint32_t max, uint32_t* out, Diagnostics& diag) {
  const std::string what =
      absl::StrCat("a whole number from ", min, " to ", max);
  const std::optional<double> n = ReadNumber(e, key, min, max, what, diag);
  if (!n.has_value()) return;
  if (*n != static_cast<double>(static_cast<uint32_t>(*n))) {
    diag.Error(e.value_mark,
               absl::StrCat(key, ": expected ", what, ", got ", *n));
    return;
  }
  *out = static_cast<uint32_t>(*n);
}

// A size in [min, max] (`range` says it in the error) into *out.
void ReadSizeIn(const MapEntry& e, const std::string& key, uint64_t min,
                uint64_t max, absl::string_view range, uint64_t* out,
                Diagnostics& diag) {
  const std::optional<uint64_t> size = ReadSize(e, key, diag);
  if (!size.has_value()) return;
  if (*size < min || *size > max) {
    diag.Error(e.value_mark, absl::StrCat(key, ": ", *size,
                                          " bytes is outside ", range));
    return;
  }
  *out = *size;
}

}  // namespace

void ReadStorage(const MapEntry& entry, const std::filesystem::path& base_dir,
                 StorageOptions* out, Diagnostics& diag) {
  if (!ExpectMap(entry, "storage", "{cache_limit: 500GiB}", diag)) return;
  for (const MapEntry& e :
       ReadMap(entry.value, "storage", AllowedKeys("storage"), diag)) {
    const std::string key = absl::StrCat("storage.", e.key);
    if (e.key == "cache_limit") {
      if (auto size = ReadSize(e, key, diag)) out->cache_limit = *size;
    } else if (e.key == "parallel") {
      ReadWhole(e, key, 1, 256, &out->parallel, diag);
    } else if (e.key == "retries") {
      ReadWhole(e, key, 0, 20, &out->retries, diag);
    } else if (e.key == "chunk_size") {
      ReadSizeIn(e, key, uint64_t{64} << 10, uint64_t{1} << 30, "64KiB to 1GiB",
                 &out->chunk_size, diag);
    } else if (e.key == "piece_size") {
      ReadSizeIn(e, key, uint64_t{64} << 10, uint64_t{1} << 30, "64KiB to 1GiB",
                 &out->piece_size, diag);
    } else if (e.key == "read_parallel") {
      ReadWhole(e, key, 1, 256, &out->read_parallel, diag);
    } else if (e.key == "read_ahead") {
      ReadWhole(e, key, 0, 64, &out->read_ahead, diag);
    } else if (e.key == "read_block") {
      if (e.value.IsScalar() && e.value.Scalar() == "0") {
        out->read_block = 0;  // Each record alone.
      } else {
        ReadSizeIn(e, key, uint64_t{4} << 10, uint64_t{64} << 20,
                   "0 or 4KiB to 64MiB", &out->read_block, diag);
      }
    } else if (e.key == "read_cache") {
      ReadSizeIn(e, key, uint64_t{1} << 20, uint64_t{1} << 40, "1MiB to 1TiB",
                 &out->read_cache, diag);
    } else if (e.key == "s3") {
      ReadS3(e, base_dir, out, diag);
    }
  }
}

}  // namespace stoker::config::internal
