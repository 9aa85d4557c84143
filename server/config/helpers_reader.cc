#include "server/config/helpers_reader.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/config/config_reference.h"
#include "server/config/value_readers.h"

namespace stoker::config::internal {
namespace {

void ReadAddresses(const MapEntry& entry, HelperOptions* out,
                   Diagnostics& diag) {
  if (!entry.value.IsSequence()) {
    diag.Error(entry.value_mark,
               absl::StrCat("helpers.addresses: expected a list of HOST:PORT "
                            "like [10.0.0.2:7411], got ",
                            Describe(entry.value)));
    return;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    const YAML::Node& item = entry.value[i];
    MapEntry as_entry{entry.key, entry.key_node, item,
                      MarkOf(item, entry.value_mark)};
    const std::string key = absl::StrCat("helpers.addresses[", i, "]");
    std::optional<std::string> address = ReadAddress(as_entry, key, diag);
    if (!address) continue;
    if (!seen.insert(*address).second) {
      diag.Error(as_entry.value_mark,
                 absl::StrCat(key, ": ", *address, " is listed twice"));
      continue;
    }
    out->addresses.push_back(*address);
  }
}

}  // namespace

void ReadHelpers(const MapEntry& entry, HelperOptions* out, Diagnostics& diag) {
  if (!ExpectMap(entry, "helpers", "{addresses: [10.0.0.2:7411]}", diag)) {
    return;
  }
  for (const MapEntry& e :
       ReadMap(entry.value, "helpers", AllowedKeys("helpers"), diag)) {
    const std::string key = absl::StrCat("helpers.", e.key);
    if (e.key == "addresses") {
      ReadAddresses(e, out, diag);
    } else if (e.key == "dns") {
      if (auto name = ReadAddress(e, key, diag)) out->dns = *name;
    } else if (e.key == "dns_refresh_seconds") {
      if (auto s = ReadNumber(e, key, 1, 3600,
                              "a number of seconds from 1 to 3600", diag)) {
        out->dns_refresh_seconds = *s;
      }
    } else if (e.key == "placement") {
      std::optional<std::string> p =
          ReadString(e, key, "local_first or remote_first", diag);
      if (!p) continue;
      if (*p == "local_first") {
        out->placement = HelperOptions::Placement::kLocalFirst;
      } else if (*p == "remote_first") {
        out->placement = HelperOptions::Placement::kRemoteFirst;
      } else {
        diag.Error(e.value_mark,
                   absl::StrCat(key,
                                ": expected local_first or remote_first, "
                                "got ",
                                *p));
      }
    } else if (e.key == "chunk_steps") {
      if (auto n = ReadCount(e, key, diag)) out->chunk_steps = *n;
    } else if (e.key == "streams") {
      if (auto n = ReadCount(e, key, diag)) out->streams = *n;
    } else if (e.key == "stall_seconds") {
      if (auto s = ReadNumber(e, key, 0.1, 3600,
                              "a number of seconds from 0.1 to 3600", diag)) {
        out->stall_seconds = *s;
      }
    }
  }
}

}  // namespace stoker::config::internal
