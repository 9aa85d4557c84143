#include "server/config/byte_size.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker::config {
namespace {

struct Unit {
  absl::string_view name;
  uint64_t multiplier;
};

constexpr uint64_t kKi = 1024;
constexpr uint64_t kK = 1000;

// A unit must match the whole suffix after the number.
constexpr std::array<Unit, 13> kUnits = {{
    {"b", 1},
    {"kib", kKi},
    {"mib", kKi* kKi},
    {"gib", kKi* kKi* kKi},
    {"tib", kKi* kKi* kKi* kKi},
    {"pib", kKi* kKi* kKi* kKi* kKi},
    {"eib", kKi* kKi* kKi* kKi* kKi* kKi},
    {"kb", kK},
    {"mb", kK* kK},
    {"gb", kK* kK* kK},
    {"tb", kK* kK* kK* kK},
    {"pb", kK* kK* kK* kK* kK},
    {"eb", kK* kK* kK* kK* kK* kK},
}};

absl::Status Expected(absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat("expected a size like 2GiB, got '", text, "'"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(std::string_view std_text) {
  const absl::string_view text(std_text.data(), std_text.size());
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  size_t pos = 0;
  // The number: digits, then optionally '.' and more digits.
  const size_t int_begin = pos;
  while (pos < trimmed.size() && absl::ascii_isdigit(trimmed[pos])) ++pos;
  const absl::string_view int_digits =
      trimmed.substr(int_begin, pos - int_begin);
  absl::string_view frac_digits;
  if (pos < trimmed.size() && trimmed[pos] == '.') {
    ++pos;
    const size_t frac_begin = pos;
    while (pos < trimmed.size() && absl::ascii_isdigit(trimmed[pos])) ++pos;
    frac_digits = trimmed.substr(frac_begin, pos - frac_begin);
    if (frac_digits.empty()) return Expected(text);
  }
  if (int_digits.empty()) return Expected(text);
  while (pos < trimmed.size() && trimmed[pos] == ' ') ++pos;
  const std::string unit_name = absl::AsciiStrToLower(trimmed.substr(pos));

  uint64_t multiplier = 1;
  if (!unit_name.empty()) {
    bool found = false;
    for (const Unit& unit : kUnits) {
      if (unit.name == unit_name) {
        multiplier = unit.multiplier;
        found = true;
        break;
      }
    }
    if (!found) return Expected(text);
  }

  // Exact integer arithmetic: value = (int_digits.frac_digits) * multiplier.
  // 128 bits hold any 64-bit value times 10, so overflow is checked per digit.
  using u128 = unsigned __int128;
  constexpr u128 kMax = UINT64_MAX;
  const auto too_large = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is too large; expected at most 16EiB"));
  };
  u128 whole = 0;
  for (char c : int_digits) {
    whole = whole * 10 + static_cast<unsigned>(c - '0');
    if (whole > kMax) return too_large();
  }
  u128 bytes = whole * multiplier;
  if (bytes > kMax) return too_large();
  if (!frac_digits.empty()) {
    // fraction = frac / 10^n; keep at most 19 digits so 10^n fits in 64 bits
    // (more digits than that cannot change a whole number of bytes < 2^64
    // unless they are zeros, which we drop).
    absl::string_view digits = frac_digits;
    while (digits.size() > 19 && digits.back() == '0') digits.remove_suffix(1);
    if (digits.size() > 19) {
      return absl::InvalidArgumentError(absl::StrCat(
          "size '", text, "' is not a whole number of bytes; expected a ",
          "size like 1.5GiB"));
    }
    u128 frac = 0;
    u128 denominator = 1;
    for (char c : digits) {
      frac = frac * 10 + static_cast<unsigned>(c - '0');
      denominator *= 10;
    }
    const u128 scaled = frac * multiplier;  // < 10^19 * 2^60: fits.
    if (scaled % denominator != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "size '", text, "' is not a whole number of bytes; expected a ",
          "size like 1.5GiB"));
    }
    bytes += scaled / denominator;
    if (bytes > kMax) return too_large();
  }
  return static_cast<uint64_t>(bytes);
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr std::array<absl::string_view, 6> kBinary = {
      "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes == 0) return "0B";
  uint64_t value = bytes;
  int unit = -1;
  while (unit + 1 < static_cast<int>(kBinary.size()) && value % kKi == 0) {
    value /= kKi;
    ++unit;
  }
  if (unit < 0) return absl::StrCat(bytes, "B");
  return absl::StrCat(value, kBinary[unit]);
}

}  // namespace stoker::config
