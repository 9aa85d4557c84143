#include "server/config/helpers_reader.h"

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

void ReadTls(const MapEntry& entry, const std::filesystem::path& base_dir,
             HelperOptions* out, Diagnostics& diag) {
  out->tls = true;
  if (!ExpectMap(entry, "helpers.tls", "{ca: ca.pem}", diag)) return;
  for (const MapEntry& e :
       ReadMap(entry.value, "helpers.tls", AllowedKeys("helpers.tls"), diag)) {
    const std::string key = absl::StrCat("helpers.tls.", e.key);
    if (e.key == "server_name") {
      if (auto name = ReadString(e, key, "a host name", diag)) {
        out->tls_server_name = *name;
      }
      continue;
    }
    std::optional<std::string> path =
        ReadString(e, key, "a path to a PEM file", diag);
    if (!path) continue;
    std::string resolved = ResolvePath(base_dir, *path);
    if (e.key == "ca") out->tls_ca = std::move(resolved);
    if (e.key == "cert") out->tls_cert = std::move(resolved);
    if (e.key == "key") out->tls_key = std::move(resolved);
  }
  if (out->tls_cert.empty() != out->tls_key.empty()) {
    diag.Error(entry.value_mark,
               "helpers.tls: a client certificate needs its key and the key "
               "its certificate (cert and key, or neither)");
  }
}

// Whether `address` ("HOST:PORT") names this machine.
bool OnLoopback(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace

void ReadHelpers(const MapEntry& entry, const std::filesystem::path& base_dir,
                 HelperOptions* out, Diagnostics& diag) {
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
    } else if (e.key == "saturated_ms" || e.key == "idle_ms") {
      if (auto ms = ReadNumber(e, key, 0, 600000,
                               "milliseconds from 0 to 600000", diag)) {
        (e.key == "saturated_ms" ? out->saturated_ms : out->idle_ms) = *ms;
      }
    } else if (e.key == "stall_share") {
      if (auto share =
              ReadNumber(e, key, 0, 1, "a fraction from 0 to 1", diag)) {
        out->stall_share = *share;
      }
    } else if (e.key == "raw") {
      if (auto raw = ReadBool(e, key, diag)) out->raw = *raw;
    } else if (e.key == "compress") {
      std::optional<std::string> c =
          ReadString(e, key, "auto, zstd or none", diag);
      if (!c) continue;
      if (*c == "auto") {
        out->compress = HelperOptions::Compress::kAuto;
      } else if (*c == "zstd") {
        out->compress = HelperOptions::Compress::kZstd;
      } else if (*c == "none") {
        out->compress = HelperOptions::Compress::kNone;
      } else {
        diag.Error(
            e.value_mark,
            absl::StrCat(key, ": expected auto, zstd or none, got ", *c));
      }
    } else if (e.key == "tls") {
      ReadTls(e, base_dir, out, diag);
    } else if (e.key == "insecure") {
      if (auto insecure = ReadBool(e, key, diag)) out->insecure = *insecure;
    }
  }
  if (out->tls || out->insecure) return;
  // Batches, and the stream that asks for them, would cross the network in
  // the clear.
  std::vector<std::string> remote;
  for (const std::string& a : out->addresses) {
    if (!OnLoopback(a)) remote.push_back(a);
  }
  if (!out->dns.empty() && !OnLoopback(out->dns)) remote.push_back(out->dns);
  if (!remote.empty()) {
    diag.Error(entry.key_node.Mark(),
               absl::StrCat("helpers: ", absl::StrJoin(remote, ", "),
                            " is beyond loopback: set helpers.tls {ca: FILE} "
                            "(the helpers' listen.tls), or helpers.insecure: "
                            "true for plaintext on a trusted network"));
  }
}

}  // namespace stoker::config::internal
