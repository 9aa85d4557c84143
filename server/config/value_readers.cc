#include "server/config/value_readers.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "server/config/byte_size.h"

namespace stoker::config::internal {

std::optional<std::string> ReadString(const MapEntry& entry,
                                      absl::string_view key,
                                      absl::string_view expected,
                                      Diagnostics& diag) {
  if (entry.value.IsScalar() && !entry.value.Scalar().empty()) {
    return entry.value.Scalar();
  }
  diag.Error(entry.value_mark, absl::StrCat(key, ": expected ", expected,
                                            ", got ", Describe(entry.value)));
  return std::nullopt;
}

std::optional<bool> ReadBool(const MapEntry& entry, absl::string_view key,
                             Diagnostics& diag) {
  std::optional<bool> value =
      entry.value.IsScalar() ? ParseBool(entry.value.Scalar()) : std::nullopt;
  if (!value) {
    diag.Error(entry.value_mark,
               absl::StrCat(key, ": expected true or false, got ",
                            Describe(entry.value)));
  }
  return value;
}

std::optional<std::string> ReadAddress(const MapEntry& entry,
                                       absl::string_view key,
                                       Diagnostics& diag) {
  std::string problem;
  if (entry.value.IsScalar()) {
    problem = HostPortProblem(entry.value.Scalar());
    if (problem.empty()) return entry.value.Scalar();
    problem = absl::StrCat(" (", problem, ")");
  }
  diag.Error(entry.value_mark,
             absl::StrCat(key, ": expected HOST:PORT like 127.0.0.1:7411, got ",
                          Describe(entry.value), problem));
  return std::nullopt;
}

std::optional<uint64_t> ReadSize(const MapEntry& entry, absl::string_view key,
                                 Diagnostics& diag) {
  if (!entry.value.IsScalar()) {
    diag.Error(entry.value_mark,
               absl::StrCat(key, ": expected a size like 2GiB, got ",
                            Describe(entry.value)));
    return std::nullopt;
  }
  absl::StatusOr<uint64_t> size = ParseByteSize(entry.value.Scalar());
  if (!size.ok()) {
    diag.Error(entry.value_mark,
               absl::StrCat(key, ": ", size.status().message()));
    return std::nullopt;
  }
  if (*size == 0) {
    diag.Error(entry.value_mark,
               absl::StrCat(key, ": expected a size above zero, got ",
                            Describe(entry.value)));
    return std::nullopt;
  }
  return *size;
}

std::optional<uint32_t> ReadCount(const MapEntry& entry, absl::string_view key,
                                  Diagnostics& diag) {
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  if (entry.value.IsScalar()) {
    const std::optional<int64_t> value = ParseInt(entry.value.Scalar());
    if (value && *value >= 1 && *value <= kMax) {
      return static_cast<uint32_t>(*value);
    }
  }
  diag.Error(entry.value_mark,
             absl::StrCat(key, ": expected an integer from 1 to ", kMax,
                          ", got ", Describe(entry.value)));
  return std::nullopt;
}

std::optional<double> ReadNumber(const MapEntry& entry, absl::string_view key,
                                 double min, double max, absl::string_view what,
                                 Diagnostics& diag) {
  if (entry.value.IsScalar()) {
    const std::optional<double> value = ParseNumber(entry.value.Scalar());
    if (value && *value >= min && *value <= max) return value;
  }
  diag.Error(entry.value_mark, absl::StrCat(key, ": expected ", what, ", got ",
                                            Describe(entry.value)));
  return std::nullopt;
}

std::optional<uint32_t> ReadFileMode(const MapEntry& entry,
                                     absl::string_view key, Diagnostics& diag) {
  // The same digits whether quoted or not: YAML 1.1 would read a plain 0660
  // as octal and YAML 1.2 as decimal, so we always read them as octal.
  if (entry.value.IsScalar()) {
    const std::string& text = entry.value.Scalar();
    if (!text.empty() && text.size() <= 4 &&
        text.find_first_not_of("01234567") == std::string::npos) {
      const unsigned long mode = std::strtoul(text.c_str(), nullptr, 8);
      if (mode <= 0777) return static_cast<uint32_t>(mode);
    }
  }
  diag.Error(entry.value_mark,
             absl::StrCat(key,
                          ": expected octal permission bits like "
                          "\"0660\", got ",
                          Describe(entry.value)));
  return std::nullopt;
}

std::string ResolvePath(const std::filesystem::path& base_dir,
                        absl::string_view path) {
  std::filesystem::path resolved{std::string(path)};
  if (resolved.is_relative()) resolved = base_dir / resolved;
  return resolved.lexically_normal().string();
}

bool ExpectMap(const MapEntry& entry, absl::string_view key,
               absl::string_view example, Diagnostics& diag) {
  if (entry.value.IsMap()) return true;
  diag.Error(entry.value_mark,
             absl::StrCat(key, ": expected a map like ", example, ", got ",
                          Describe(entry.value)));
  return false;
}

std::string HostPortProblem(absl::string_view text) {
  absl::string_view host;
  absl::string_view port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return "no closing ']'";
    host = text.substr(1, close - 1);
    const absl::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest[0] != ':') return "no port";
    port = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return "no port";
    host = text.substr(0, colon);
    if (host.find(':') != absl::string_view::npos) {
      return "an IPv6 address must be in brackets";
    }
    port = text.substr(colon + 1);
  }
  if (host.empty()) return "no host";
  uint32_t number = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(),
                   [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(port, &number) || number > 65535) {
    return "the port is not a number from 0 to 65535";
  }
  return "";
}

bool IsLoopbackAddress(absl::string_view host_port) {
  absl::string_view host = host_port.substr(0, host_port.rfind(':'));
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  const std::string text(host);
  if (absl::AsciiStrToLower(text) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool CheckName(const MapEntry& entry, absl::string_view kind,
               Diagnostics& diag) {
  const std::string& name = entry.key;
  bool ok = !name.empty() && (absl::ascii_isalnum(name[0]) || name[0] == '_');
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') {
      ok = false;
    }
  }
  if (!ok) {
    diag.Error(entry.key_node.Mark(),
               absl::StrCat(kind, " name '", name,
                            "' has characters not allowed; expected letters, "
                            "digits, '_', '-' and '.', starting with a "
                            "letter, digit or '_'"));
  }
  return ok;
}

}  // namespace stoker::config::internal
