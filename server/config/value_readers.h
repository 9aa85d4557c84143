// Readers for the scalar values of the config file (strings, sizes, counts,
// addresses, names). Each reports a mistake to Diagnostics as
// "KEY: expected ..., got ..." at the value and returns nullopt.
//
// Internal to server/config/.
//
// Thread-safety: pure functions apart from writing to the Diagnostics they
// are handed.

#ifndef STOKER_SERVER_CONFIG_VALUE_READERS_H_
#define STOKER_SERVER_CONFIG_VALUE_READERS_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "server/config/yaml_util.h"

namespace stoker::config::internal {

// A non-empty scalar. `expected` describes it: "a path".
std::optional<std::string> ReadString(const MapEntry& entry,
                                      absl::string_view key,
                                      absl::string_view expected,
                                      Diagnostics& diag);

// true or false (yes/no, on/off: ParseBool).
std::optional<bool> ReadBool(const MapEntry& entry, absl::string_view key,
                             Diagnostics& diag);

// "HOST:PORT" or "[V6ADDR]:PORT", port 0..65535.
std::optional<std::string> ReadAddress(const MapEntry& entry,
                                       absl::string_view key,
                                       Diagnostics& diag);

// A size above zero, as ParseByteSize reads it.
std::optional<uint64_t> ReadSize(const MapEntry& entry, absl::string_view key,
                                 Diagnostics& diag);

// An integer from 1 to 2^32-1.
std::optional<uint32_t> ReadCount(const MapEntry& entry, absl::string_view key,
                                  Diagnostics& diag);

// A number in [min, max]; `what` describes the range in the error, e.g.
// "a number of seconds >= 0".
std::optional<double> ReadNumber(const MapEntry& entry, absl::string_view key,
                                 double min, double max, absl::string_view what,
                                 Diagnostics& diag);

// Octal permission bits up to 0777, e.g. "0660".
std::optional<uint32_t> ReadFileMode(const MapEntry& entry,
                                     absl::string_view key, Diagnostics& diag);

// `path` made absolute against `base_dir` (absolute) and lexically normal.
std::string ResolvePath(const std::filesystem::path& base_dir,
                        absl::string_view path);

// True if entry.value is a map; otherwise reports, showing `example`.
bool ExpectMap(const MapEntry& entry, absl::string_view key,
               absl::string_view example, Diagnostics& diag);

// Why `text` is not HOST:PORT, or "" if it is.
std::string HostPortProblem(absl::string_view text);

// Whether the host of a valid "HOST:PORT" is only reachable from this node:
// localhost, 127.0.0.0/8, ::1 or ::ffff:127.x.y.z. Any other host, a
// wildcard (0.0.0.0, [::]) or a name, counts as remote.
bool IsLoopbackAddress(absl::string_view host_port);

// Dataset and pipeline names travel in requests and metric labels, so they
// keep to letters, digits, '_', '-' and '.', starting with a letter, digit
// or '_'. Reports and returns false otherwise; `kind` is "dataset" or
// "pipeline".
bool CheckName(const MapEntry& entry, absl::string_view kind,
               Diagnostics& diag);

}  // namespace stoker::config::internal

#endif  // STOKER_SERVER_CONFIG_VALUE_READERS_H_
