// Byte sizes as people write them in a config file: "2GiB", "512MiB",
// "1.5GB", "1048576".
//
// Thread-safety: pure functions, safe to call from any thread.

#ifndef STOKER_SERVER_CONFIG_BYTE_SIZE_H_
#define STOKER_SERVER_CONFIG_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace stoker::config {

// Parses a non-negative size: a decimal number, optionally with a fraction,
// then optional spaces and an optional unit. Units are B, binary KiB MiB GiB
// TiB PiB EiB (powers of 1024) and decimal KB MB GB TB PB EB (powers of
// 1000), matched case-insensitively. The result must be a whole number of
// bytes that fits in 64 bits ("1.5KiB" is 1536; "0.1KiB" is rejected).
// A bare "K", "M" or "G" is rejected as ambiguous.
//
// On failure returns InvalidArgument whose message reads
// "expected a size like 2GiB, got '<text>'" or says which rule was broken;
// the caller prefixes the key and location.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// Formats a size the way ParseByteSize reads it back: the largest binary unit
// that divides it exactly ("2GiB", "1536KiB"), or plain bytes ("1000B").
std::string FormatByteSize(uint64_t bytes);

}  // namespace stoker::config

#endif  // STOKER_SERVER_CONFIG_BYTE_SIZE_H_
