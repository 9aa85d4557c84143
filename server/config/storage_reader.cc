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
  for (const MapEntry& e : ReadMap(entry.value, "storage.s3",
                                   AllowedKeys("storage.s3"), diag)) {
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
      if (auto n = ReadNumber(e, key, 1, 256, "a whole number from 1 to 256",
                              diag)) {
        if (*n != static_cast<double>(static_cast<uint32_t>(*n))) {
          diag.Error(e.value_mark,
                     absl::StrCat(key, ": expected a whole number, got ", *n));
        } else {
          out->parallel = static_cast<uint32_t>(*n);
        }
      }
    } else if (e.key == "chunk_size") {
      if (auto size = ReadSize(e, key, diag)) {
        if (*size < (uint64_t{64} << 10) || *size > (uint64_t{1} << 30)) {
          diag.Error(e.value_mark,
                     absl::StrCat(key, ": ", *size,
                                  " bytes is outside 64KiB to 1GiB"));
        } else {
          out->chunk_size = *size;
        }
      }
    } else if (e.key == "s3") {
      ReadS3(e, base_dir, out, diag);
    }
  }
}

}  // namespace stoker::config::internal
